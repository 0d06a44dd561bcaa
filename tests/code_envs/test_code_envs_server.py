"""Bash-v0 and Code-v0 served by `agentrl serve` (a real uvicorn server on loopback): the same
behaviour as in-process, concurrent episodes, and no container outliving its episode."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym
import pytest
from code_envs_helpers import call, play_reference
from test_code_envs_tools import wait_until_no_containers

import agentrl  # noqa: F401
from agentrl.client import ServerError
from agentrl.code_envs import bash_tasks
from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def base_url(docker_backend) -> Iterator[str]:
    with serve_in_thread(ServerConfig(max_episodes=64, idle_ttl_s=3.0, reap_interval_s=0.5)) as url:
        yield url


def test_remote_episode_matches_local_one(base_url, bash_env):
    local = play_reference(bash_env, "log_errors", seed=5)
    remote_env = gym.make("agentrl/Bash-v0", base_url=base_url, pool_size=4)
    try:
        remote = play_reference(remote_env, "log_errors", seed=5)
    finally:
        remote_env.close()
    assert remote[0] == local[0] == 1.0
    assert remote[2] == local[2]  # every observation, byte for byte
    assert remote[1]["tests_passed"] == local[1]["tests_passed"]


def test_code_env_through_the_server(base_url):
    env = gym.make("agentrl/Code-v0", base_url=base_url, pool_size=4)
    try:
        reward, info, _ = play_reference(env, "module_suite", seed=1, env_id="agentrl/Code-v0")
        assert reward == 1.0 and info["tests_passed"] == info["tests_total"]
        obs, _ = env.reset(seed=0, options={"family": "implement"})
        obs, *_ = env.step(call("run_python", code="y = 6 * 7"))
        obs, *_ = env.step(call("run_python", code="y"))
        assert "42" in obs
    finally:
        env.close()


def test_sixteen_concurrent_episodes_leave_no_container(base_url, cold_backend):
    jobs = [(tuple(bash_tasks.FAMILIES)[i % 9], i) for i in range(16)]

    def one(job: tuple[str, int]) -> float:
        env = gym.make("agentrl/Bash-v0", base_url=base_url, pool_size=0)
        try:
            return play_reference(env, *job)[0]
        finally:
            env.close()

    with ThreadPoolExecutor(16) as pool:
        rewards = list(pool.map(one, jobs))
    assert rewards == [1.0] * 16
    wait_until_no_containers(cold_backend)


def test_expired_episode_deletes_its_container(base_url, cold_backend):
    env = gym.make("agentrl/Bash-v0", base_url=base_url, pool_size=0)
    env.reset(options={"family": "count_files"})
    assert cold_backend.container_ids()
    time.sleep(3.5)  # idle TTL of this server: 3 s, reaped every 0.5 s
    wait_until_no_containers(cold_backend)
    with pytest.raises(ServerError):
        env.step(call("execute_bash", command="true"))


@pytest.fixture(scope="module")
def sandbox_server_url(docker_backend) -> Iterator[str]:
    """`agentrl sandbox serve`'s app on loopback, over its own Docker backend."""
    from agentrl.sandbox_server import DockerBackend, create_app
    from agentrl.server.local import free_port
    from agentrl.serving.runner import ServerThread, uvicorn_config

    backend = DockerBackend(pool_size=2)
    port = free_port()
    served = ServerThread(uvicorn_config(create_app(backend), host="127.0.0.1", port=port),
                          "the sandbox server", startup_timeout_s=20)
    yield f"http://127.0.0.1:{port}"
    served.stop(timeout_s=10)
    backend.close()


@pytest.mark.parametrize("env_id, family", [("agentrl/Bash-v0", "git_ops"), ("agentrl/Code-v0", "fix_bug")])
def test_envs_work_through_the_sandbox_server(sandbox_server_url, env_id, family):
    env = gym.make(env_id, sandbox_url=sandbox_server_url)
    try:
        reward, info, _ = play_reference(env, family, seed=5, env_id=env_id)
        assert reward == 1.0, info
        if env_id == "agentrl/Code-v0":
            env.reset(options={"family": family})
            env.step(call("run_python", code="z = 5"))
            obs, *_ = env.step(call("run_python", code="z * 2"))
            assert "10" in obs
    finally:
        env.close()
