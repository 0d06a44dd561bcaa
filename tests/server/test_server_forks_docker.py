"""Forks of Bash-v0 and Code-v0 episodes over real HTTP, on the real Docker engine: a fork replays
the episode into a container of its own, so it continues exactly as its parent (files written and
interpreter variables included), and what one fork does to its workspace no other container sees."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fork_helpers import Case, call, check_record, play_and_fork, scripted
from support import unavailable

from agentrl.client import EnvClient, RetryPolicy
from agentrl.code_envs.bash_env import BashEnv
from agentrl.code_envs.code_env import CodeEnv
from agentrl.code_envs.tasks import as_action
from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread

pytestmark = [pytest.mark.docker, pytest.mark.slow]
KWARGS = {"pool_size": 2, "command_timeout_s": 10}


def _bash_script(info: dict) -> list[str]:
    solution = [as_action(a) for a in BashEnv.make_task("log_errors", "train", 5).solution]
    return [call("execute_bash", command="echo one > notes.txt"), solution[0],
            call("execute_bash", command="cat notes.txt; echo two >> notes.txt; cat notes.txt"), solution[-1]]


def _code_script(info: dict) -> list[str]:
    solution = [as_action(a) for a in CodeEnv.make_task("module_suite", "train", 1).solution]
    return [solution[0], call("run_python", code="y = 6 * 7"), call("run_python", code="y"), *solution[1:]]


CASES = {
    "bash": Case("agentrl/Bash-v0", seed=5, fork_at=2, policy=scripted(_bash_script), env_kwargs=KWARGS,
                 options={"family": "log_errors"}, detour=call("execute_bash", command="rm notes.txt; ls")),
    "code": Case("agentrl/Code-v0", seed=1, fork_at=2, policy=scripted(_code_script), env_kwargs=KWARGS,
                 options={"family": "module_suite"}, detour=call("run_python", code="y = 0; y")),
}


@pytest.fixture(scope="module")
def client() -> Iterator[EnvClient]:
    from agentrl.sandbox_server import DockerUnavailable, shared_backend

    try:
        shared_backend(None, None, 0)
    except DockerUnavailable as exc:
        unavailable(str(exc).splitlines()[0])
    with serve_in_thread(ServerConfig(max_episodes=32)) as url, \
            EnvClient(url, timeout=120, retry=RetryPolicy(retries=0)) as c:
        yield c


@pytest.mark.parametrize("name", sorted(CASES))
def test_container_forks_continue_as_the_parent_and_are_isolated(client, name):
    case = CASES[name]
    played = play_and_fork(client, case)
    check_record(client, case, played)
    after = played["results"][case.fork_at].observation
    if name == "bash":  # the other fork removed the file in its own workspace, not in the parent's
        assert r"[exit code 0]\none\none\ntwo" in after
        assert r"[exit code 0]\nlogs" in played["detour"].observation
    else:  # the interpreter's variable came through the replay; the other fork's change stayed there
        assert r"[exit code 0]\n42" in after
        assert r"[exit code 0]\n0" in played["detour"].observation
    for eid in (played["parent"], played["same"], played["other"]):
        assert client.close_episode(eid)
    assert client.health()["live_episodes"] == 0
