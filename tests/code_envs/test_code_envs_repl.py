"""Code-v0's interpreter cells (`agentrl.code_envs.repl`) on the real engine: what a cell starts,
replay after the interpreter dies or the shell restarts, a timed-out flood and a huge output that
leave the next commands clean, the agent's shell left as it was, episodes side by side, and an agent
that takes over the interpreter's port earning nothing."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from code_envs_helpers import call

from agentrl.code_envs.code_env import CodeEnv

pytestmark = pytest.mark.docker


def content(observation: str) -> str:
    return json.loads(observation.split("<tool_response>\n", 1)[1].split("\n</tool_response>")[0])["content"]


def cell(env: CodeEnv, code: str) -> str:
    return content(env.step(call("run_python", code=code))[0])


def shell(env: CodeEnv, command: str) -> str:
    return content(env.step(call("execute_bash", command=command))[0])


# The processes of the agent's user while a cell runs, as "<name> <parent's name>".
PROCESSES = """
import os
def field(pid, name):
    with open(f"/proc/{pid}/status") as f:
        return next(line.split()[1] for line in f if line.startswith(name + ":"))
pids = [p for p in os.listdir("/proc") if p.isdigit()]
mine = [p for p in pids if field(p, "Uid") == str(os.getuid())]
sorted(f"{field(p, 'Name')} {field(field(p, 'PPid'), 'Name')}" for p in mine)
"""


def test_a_cell_starts_no_program_only_a_subshell_of_the_shell(code_env):
    code_env.reset(seed=0, options={"family": "implement"})
    cell(code_env, "x = 1")
    # the shell (whose parent is the root agent, python3), the relay (a subshell of the shell) and
    # the interpreter; no client interpreter, no other program
    listed = cell(code_env, PROCESSES)
    assert listed == "[exit code 0]\n['bash bash', 'bash python3', 'python3 docker-init']", listed


def test_an_interpreter_that_dies_comes_back_with_the_earlier_successful_cells(code_env):
    code_env.reset(seed=0, options={"family": "implement"})
    assert cell(code_env, "x = 1\nprint('setup')") == "[exit code 0]\nsetup"
    assert cell(code_env, "x += 1\nprint('bump')") == "[exit code 0]\nbump"
    assert cell(code_env, "y = x\n1 / 0").startswith("[exit code 1]")
    died = cell(code_env, "import os\nos._exit(0)")
    assert died == "[exit code 1]\n[stderr]\n[the interpreter ended during the cell]"
    # replayed silently, and only the cells that succeeded
    assert cell(code_env, "print(x, 'y' in globals())") == "[exit code 0]\n2 False"


def test_a_restarted_shell_gets_an_interpreter_with_the_same_state(code_env):
    code_env.reset(seed=0, options={"family": "implement"})
    cell(code_env, "w = 5")
    assert shell(code_env, "exit 0") == "[exit code 0]"  # the session shell ends: new pipes next time
    assert cell(code_env, "w * 2") == "[exit code 0]\n10"
    assert shell(code_env, "echo again") == "[exit code 0]\nagain"


def test_a_timed_out_flood_leaves_the_next_commands_clean(code_env):
    code_env.reset(seed=0, options={"family": "implement"})
    cell(code_env, "z = 7")
    flood = cell(code_env, "import itertools\nfor i in itertools.count():\n    print('flood', i)")
    assert flood.startswith("[timed out after 5s; output so far below]\n[output truncated: stdout ")
    assert "\nflood 0\n" in flood
    assert flood.endswith("[the cell was interrupted; variables from earlier cells are kept]")
    assert shell(code_env, "echo clean") == "[exit code 0]\nclean"
    assert cell(code_env, "z") == "[exit code 0]\n7"


def test_a_huge_output_is_capped_by_the_sandbox_and_the_interpreter_goes_on(code_env):
    code_env.reset(seed=0, options={"family": "implement"})
    flood = cell(code_env, "v = 3\nprint('x' * 10**7)")
    assert flood.startswith("[exit code 0]\n[output truncated: stdout 10000001 bytes, stderr 0 bytes")
    assert len(flood) < 3 * code_env.max_output_bytes
    assert cell(code_env, "v + 1") == "[exit code 0]\n4"


def test_a_thread_left_by_a_cell_writes_into_no_later_output(code_env):
    code_env.reset(seed=0, options={"family": "implement"})
    started = cell(
        code_env,
        "import sys, threading, time\nout = sys.stdout\n"
        "def later():\n    time.sleep(0.3)\n    print('late', flush=True)\n"
        "    print('late', file=out, flush=True)\n"
        "threading.Thread(target=later, daemon=True).start()\nprint('now')",
    )
    assert started == "[exit code 0]\nnow"
    time.sleep(0.6)
    assert shell(code_env, "echo next") == "[exit code 0]\nnext"
    assert cell(code_env, "1 + 1") == "[exit code 0]\n2"


def test_the_agents_shell_is_left_as_it_was(code_env):
    code_env.reset(seed=0, options={"family": "implement"})
    # options, IFS, a function named like a builtin, fd 3 in use, cwd and a variable
    shell(code_env, "cd /tmp && export MARK=kept && exec 3>three && read() { echo fake; }; IFS=:; set -u")
    # the interpreter has its own clean environment and the workspace as cwd
    out = cell(code_env, "import os\nprint(os.getcwd(), os.environ.get('MARK'))\n1 / 0")
    assert out == (
        "[exit code 1]\n/workspace None\n[stderr]\nTraceback (most recent call last):\n"
        '  File "<cell>", line 3, in <module>\nZeroDivisionError: division by zero'
    )
    after = shell(code_env, 'set +u; IFS=" "; echo "$MARK"; pwd; echo probe >&3; cat three; type -t read')
    assert after == "[exit code 0]\nkept\n/tmp\nprobe\nfunction"


def test_episodes_side_by_side_keep_their_own_interpreters(docker_backend):
    def episode(i: int) -> list[str]:
        env = CodeEnv(pool_size=4, command_timeout_s=5)
        try:
            env.reset(seed=i, options={"family": "implement"})
            cell(env, f"v = {i}")
            return [cell(env, "v += 0\nv") for _ in range(4)]
        finally:
            env.close()

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(episode, range(3)))
    assert results == [[f"[exit code 0]\n{i}"] * 4 for i in range(3)]


# Takes the port over: a fork of the interpreter keeps its listening socket and answers "passed" to
# every relay without running anything, while the interpreter itself stops accepting.
SQUAT = """
import os, time, __main__
listener = __main__.server
if os.fork() == 0:
    while True:
        conn, _ = listener.accept()
        conn.recv(64)
        conn.sendall(b"0\\n")
        conn.close()
class Deaf:
    def accept(self):
        time.sleep(10**6)
__main__.server = Deaf()
"""


def test_an_agent_that_takes_the_interpreters_port_earns_nothing(docker_backend):
    env = CodeEnv(pool_size=4, command_timeout_s=5, split="test")
    try:
        for family in ("implement", "fix_bug", "module_suite"):
            env.reset(seed=1, options={"family": family})
            assert cell(env, SQUAT) == "[exit code 0]"
            assert cell(env, "raise SystemExit('never run')") == "[exit code 0]"  # its own answer
            _, reward, terminated, _, info = env.step(call("finish", answer="done"))
            assert terminated and reward == 0.0 and "error" not in info, (family, info)
    finally:
        env.close()


def test_a_request_that_breaks_the_protocol_fails_loudly_and_the_interpreter_goes_on(code_env):
    from agentrl.code_envs import repl

    code_env.reset(seed=0, options={"family": "implement"})
    cell(code_env, "kept = 'yes'")
    out = code_env.sandbox.exec(repl.RELAY, stdin="not json", timeout_s=5)
    assert out.exit_code == 1 and out.stderr.startswith("[the interpreter failed: JSONDecodeError(")
    assert cell(code_env, "kept") == "[exit code 0]\n'yes'"
