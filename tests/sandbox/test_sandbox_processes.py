"""Which processes outlive a command: strays die, `keep_alive` keeps, `reset_processes` ends them all."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from agentrl.sandbox_server import AsyncSandboxClient, SandboxClient

pytestmark = pytest.mark.docker

SERVER = "import socket, os\ns = socket.socket(socket.AF_UNIX); s.bind('/tmp/srv.sock'); s.listen()\n"


def sleeps(sandbox, expected: set[str] | None = None) -> set[str]:
    """The test's sleeps running in the sandbox. With `expected`, waits up to 10 s for exactly that
    set: a command returns once its `&` has forked, and under load a child may not have become
    `sleep` (or `setsid sleep`, which counts too) by the time `ps` runs."""
    deadline = time.monotonic() + 10
    while True:
        found = set(re.findall(r"sleep 1[0-9][0-9]", sandbox.exec("ps -eo args").stdout))
        if expected is None or found == expected or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_keep_alive_keeps_what_the_command_leaves_running(sandbox):
    sandbox.exec("setsid sleep 101 </dev/null >/dev/null 2>&1 &", keep_alive=True)
    sandbox.exec("sleep 102 &", mode="oneshot", keep_alive=True)
    sandbox.exec("sleep 103 & sleep 104 &")  # not kept
    assert sleeps(sandbox, {"sleep 101", "sleep 102"}) == {"sleep 101", "sleep 102"}
    # kept processes survive any number of later commands, in both modes
    for mode in ("session", "oneshot"):
        sandbox.exec("true", mode=mode)
    assert sleeps(sandbox, {"sleep 101", "sleep 102"}) == {"sleep 101", "sleep 102"}


def test_children_of_a_kept_server_survive(sandbox):
    # a server in its own session (like Code-v0's interpreter) forks helpers later: they belong to it
    server = "setsid bash -c 'sleep 0.3; n=10; sleep ${n}5 & wait' </dev/null >/dev/null 2>&1 &"
    sandbox.exec(server, keep_alive=True)
    sandbox.exec("sleep 0.6")
    assert sleeps(sandbox, {"sleep 105"}) == {"sleep 105"}


def test_reset_processes_kills_everything_of_the_user(sandbox):
    sandbox.exec("cd /tmp && export X=1")
    sandbox.exec("setsid sleep 106 </dev/null >/dev/null 2>&1 & sleep 107 &", keep_alive=True)
    assert sleeps(sandbox, {"sleep 106", "sleep 107"}) == {"sleep 106", "sleep 107"}
    sandbox.reset_processes()
    assert sleeps(sandbox) == set()
    # the next session command gets a fresh shell in the workspace
    assert sandbox.exec("echo $PWD ${X:-unset}").stdout == "/workspace unset\n"
    assert sandbox.exec("ps -eo user= | sort | uniq -c | awk '{print $2}' | sort").stdout == "root\nsandbox\n"
    # and nothing kept earlier is kept any more
    sandbox.exec("sleep 108 &")
    assert sleeps(sandbox) == set()


def test_reset_processes_beats_a_process_that_respawns_itself(sandbox):
    respawn = "setsid bash -c 'while :; do (sleep 109 &); sleep 0.01; done' </dev/null >/dev/null 2>&1 &"
    sandbox.exec(respawn, keep_alive=True)
    sandbox.reset_processes()
    assert sandbox.exec("pgrep -c -x sleep || true").stdout == "0\n"


def test_oneshot_runs_clean(sandbox):
    sandbox.exec("export LEAK=1; cd /tmp; exec 7>/tmp/fd7")
    env = sandbox.exec("env | sort", mode="oneshot").stdout.splitlines()
    names = {line.split("=", 1)[0] for line in env}
    assert {"PATH", "HOME", "LANG"} <= names and "LEAK" not in names
    assert "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" in env
    assert "HOME=/workspace" in env
    assert not any(name.startswith("AGENTRL") for name in names)
    assert sandbox.exec("pwd", mode="oneshot").stdout == "/workspace\n"
    # only its own stdin, stdout and stderr (+ the fd ls itself opens)
    fds = sandbox.exec("ls /proc/self/fd", mode="oneshot").stdout.split()
    assert fds == ["0", "1", "2", "3"], fds
    py = sandbox.run_code("import os; print(sorted(os.listdir('/proc/self/fd')))").stdout
    assert py == "['0', '1', '2', '3']\n", py


def test_session_commands_do_not_see_the_shell_pipes(sandbox):
    assert sandbox.exec("ls /proc/self/fd").stdout.split() == ["0", "1", "2", "3"]
    # writing a fake exit status where the shell reports it is impossible
    assert sandbox.exec("echo 0 0 >&61; echo x >&60; exit 7").exit_code in (1, 7)
    assert sandbox.exec("false").exit_code == 1


def test_remote_clients_have_keep_alive_and_reset(server):
    with SandboxClient(server.url, token=server.token) as client, client.create() as sb:
        sb.exec("sleep 110 &", keep_alive=True)
        assert sleeps(sb, {"sleep 110"}) == {"sleep 110"}
        sb.reset_processes()
        assert sleeps(sb) == set()

    async def main() -> tuple[str, str]:
        async with AsyncSandboxClient(server.url, token=server.token) as client:
            sb = await client.create()
            try:
                await sb.exec("sleep 111 &", keep_alive=True)
                before = (await sb.exec("pgrep -c sleep")).stdout
                await sb.reset_processes()
                after = (await sb.exec("pgrep -c sleep || true")).stdout
                again = await client.get(sb.sandbox_id)
                assert again.sandbox_id == sb.sandbox_id
                return before, after
            finally:
                await sb.aclose()

    assert asyncio.run(main()) == ("1\n", "0\n")
