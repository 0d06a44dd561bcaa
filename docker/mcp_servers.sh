#!/usr/bin/env bash
# The MCP servers of the sandbox image, on the host too: a virtualenv of their own, .venvs/mcp-servers,
# from the same lock (docker/mcp-servers.txt), for agentrl/MCP-v0's process isolation and its tests
# (.venvs/mcp-servers/bin/mcp-server-git, .../mcp-server-time). Not in .venv: the servers need
# mcp>=2.3 and the [verifiers] extra pins mcp==2.0.0. A venv made from the current lock is kept.
# Run by tests/run.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.venvs/mcp-servers
lock=docker/mcp-servers.txt
if [ -f "$dir/.lock" ] && cmp -s "$dir/.lock" "$lock"; then
    exit 0
fi
rm -rf "$dir"
"${PYTHON:-python3}" -m venv "$dir"
"$dir/bin/python" -m pip install -q --no-deps -r "$lock"
"$dir/bin/mcp-server-git" --help >/dev/null
cp "$lock" "$dir/.lock"
