#!/usr/bin/env bash
# One virtualenv per training framework, .venvs/<name>, for tests/integrations/test_frameworks_<name>.py:
# the frameworks pin transformers, ray, torch... against each other and against agentrl's extras, so
# none can share .venv. Each installs the framework without its dependencies plus the few packages its
# interface module imports, and chains to .venv for everything else (agentrl itself, torch's CPU
# build, transformers): a .pth file adds .venv's site-packages after its own. A venv whose package
# list is unchanged is kept. Run by tests/run after .venv is made.
set -euo pipefail
cd "$(dirname "$0")/.."

# name | packages installed without their dependencies | packages installed with theirs
FRAMEWORKS=(
    "verl|verl==0.9.1 ray==2.60.0 tensordict==0.10.0 pyvers==0.2.3 codetiming==1.4.0|hydra-core==1.3.8"
    "openrlhf|openrlhf==0.11.2 pylatexenc==2.11|"
    "gem|gem-llm==0.1.0|reasoning-gym==0.1.23 math-verify[antlr4_13_2]"
    "areal|areal==1.0.4 ray==2.60.0 torchdata==0.11.0 numba==0.68.1 llvmlite==0.50.0 einops==0.8.2 colorlog==6.12.0 Flask==3.1.3 blinker==1.9.0 itsdangerous==2.2.0 lark==1.3.1|hydra-core==1.3.2"
)

main_site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
for entry in "${FRAMEWORKS[@]}"; do
    IFS='|' read -r name nodeps withdeps <<<"$entry"
    dir=".venvs/$name"
    if [ -f "$dir/.packages" ] && [ "$(cat "$dir/.packages")" = "$entry" ]; then
        continue
    fi
    rm -rf "$dir"
    .venv/bin/python -m venv "$dir"
    site=$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "import site; site.addsitedir('$main_site')" >"$site/_chain_agentrl.pth"
    # shellcheck disable=SC2086
    "$dir/bin/python" -m pip install -q --no-deps $nodeps
    if [ -n "$withdeps" ]; then
        # torch is .venv's CPU build, seen through the chain; this pin stops any other from being pulled
        # shellcheck disable=SC2086
        "$dir/bin/python" -m pip install -q $withdeps 'torch==2.13.0'
    fi
    echo "$entry" >"$dir/.packages"
done
