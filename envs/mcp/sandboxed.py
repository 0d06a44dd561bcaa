"""Sandbox isolation: the episode's server runs inside a container of the sandbox server (networking
off, CPU, memory and process limits on), in the container's fresh workspace.

The task's files are uploaded with the container's creation and its setup script runs there as a
one-shot command; then an exec that keeps its process alive starts the bridge
(`agentrl.mcp.bridge`), which starts the server over stdio and runs the MCP handshake. Every call
afterwards is one relay of the sandbox (`Sandbox.relay`): the sandbox's agent sends the request to the
bridge's port on the container's loopback and reads its answer, with no command run, so a call costs
a round trip to the agent. "{workspace}" is the container's working directory, the same path in
every episode.

The backend (the in-process Docker backend, or the HTTP client of a sandbox server or cluster) is the
process's one (`agentrl.sandbox_server.shared_backend`), shared with every other env, Bash-v0's
and Code-v0's included: its pool of pre-started containers serves every episode.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrl.mcp import bridge
from agentrl.mcp.client import ServerFailure, ToolListing
from agentrl.mcp.servers import SETUP_TIMEOUT_S, setup_calls
from agentrl.mcp.tasks import Task, substitute

if TYPE_CHECKING:
    from agentrl.mcp.servers import ServerConfig

RELAY_MARGIN_S = 10.0  # past the bridge's own timeout: only a bridge that died runs into it
OUTPUT_BYTES = 4 << 20  # what a relay may answer: a result is clipped inside the container first


@dataclass
class SandboxedServer:
    """A server inside a sandbox, reached through the bridge."""

    task_id: str
    workspace: str
    sandbox: Any
    listing: ToolListing
    setup_seconds: float
    junk: tuple[int, list[str]] = (0, [])

    def request(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """One request to the bridge, through one relay of the sandbox to its port: a line each way on the
        connection the sandbox's agent keeps to the bridge."""
        from agentrl.sandbox_server import SandboxError

        try:
            out = self.sandbox.relay(
                bridge.PORT,
                json.dumps(request) + "\n",
                timeout_s=timeout_s + RELAY_MARGIN_S,
                max_output_bytes=OUTPUT_BYTES,
                reply_ends="line",
            )
        except (SandboxError, OSError) as exc:
            raise ServerFailure(
                "crashed", f"the sandbox failed: {type(exc).__name__}: {str(exc)[:300]}"
            ) from None
        if out.truncated:
            raise ServerFailure("protocol", "the answer was larger than a relay carries")
        if out.status != "ok" or not out.data.endswith("\n"):
            raise ServerFailure(
                "crashed",
                f"the bridge to the server did not answer ({out.status}; "
                f"{len(out.data)} characters came)",
            )
        answer = json.loads(out.data)
        if "failure" in answer:
            raise ServerFailure(answer["failure"], answer["message"])
        return answer

    def call(self, name: str, arguments: dict[str, Any], timeout_s: float, limit: int) -> tuple[str, bool]:
        answer = self.request(
            {"op": "call", "name": name, "arguments": arguments, "timeout_s": timeout_s, "limit": limit},
            timeout_s,
        )
        self.junk = (answer["junk"][0], answer["junk"][1])
        return answer["text"], bool(answer["is_error"])

    def take_junk(self) -> tuple[int, list[str]]:
        taken, self.junk = self.junk, (0, [])
        return taken

    def close(self) -> None:
        self.sandbox.close()


def start_sandboxed(task: Task, config: ServerConfig) -> SandboxedServer:
    """A sandbox with `task`'s workspace, its server started behind the bridge and set up."""
    from agentrl.sandbox_server.wire.models import WORKDIR

    began = time.perf_counter()
    create: dict[str, Any] = {"files": dict(task.files)} if task.files else {}
    if config.image is not None:
        create["image"] = config.image
    from agentrl.sandbox_server import shared_backend

    sandbox = shared_backend(config.sandbox_url, config.sandbox_token).create(**create)
    try:
        if task.script:
            out = sandbox.exec(substitute(task.script, WORKDIR), mode="oneshot", timeout_s=SETUP_TIMEOUT_S)
            if out.status != "ok" or out.exit_code != 0:
                raise RuntimeError(
                    f"task {task.id!r}: setup script failed ({out.status}, exit {out.exit_code}): "
                    f"{out.stderr[-500:]}"
                )
        setup_seconds = time.perf_counter() - began
        argv = substitute(list(config.server), WORKDIR)
        q = shlex.quote
        out = sandbox.exec(
            f"mkdir -p {q(bridge.HOME)} && rm -f {q(bridge.READY)} || exit 1; "
            f"( cd {q(WORKDIR)} && exec python3 -c {q(bridge.source())} {bridge.PORT} {q(bridge.READY)} "
            f"{q(json.dumps(argv))} ) </dev/null >/dev/null 2>>{q(bridge.STDERR)} & "
            f"until [ -e {q(bridge.READY)} ]; do kill -0 $! 2>/dev/null || "
            f"{{ tail -c 600 {q(bridge.STDERR)} >&2; exit 1; }}; sleep 0.01; done",
            mode="session",
            keep_alive=True,
            timeout_s=config.start_timeout_s,
        )
        if out.status != "ok" or out.exit_code != 0:
            raise ServerFailure(
                "start", f"the server did not start in the sandbox ({out.status}): {out.stderr[-600:]}"
            )
        opened = SandboxedServer(
            task.id, WORKDIR, sandbox, ToolListing([], False, config.max_tools), setup_seconds
        )
        answer = opened.request({"op": "list", "limit": config.max_tools}, config.start_timeout_s)
        opened.listing = ToolListing(answer["tools"], answer["more"], config.max_tools)
        calls_began = time.perf_counter()
        setup_calls(opened, task, config.call_timeout_s)
        opened.setup_seconds += time.perf_counter() - calls_began
        opened.take_junk()
        return opened
    except BaseException:
        sandbox.close()
        raise
