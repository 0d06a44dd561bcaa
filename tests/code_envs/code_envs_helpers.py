"""Helpers shared by the Bash-v0 / Code-v0 tests (a uniquely named module)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from support import step_actions

from agentrl.code_envs.bash_env import BashEnv
from agentrl.code_envs.code_env import CodeEnv
from agentrl.code_envs.tasks import Task, as_action
from agentrl.core import tool_call as call  # noqa: F401  (the one way to write a call, for the tests that import it here)

ENV_CLASSES = {"agentrl/Bash-v0": BashEnv, "agentrl/Code-v0": CodeEnv}


def task_of(env_id: str, family: str, seed: int, split: str = "train") -> Task:
    """The task `reset(seed=seed, options={"family": family, "split": split})` plays."""
    return ENV_CLASSES[env_id].make_task(family, split, seed)


def play_reference(
    env: Any, family: str, seed: int = 0, env_id: str = "agentrl/Bash-v0", split: str = "train"
) -> tuple[float, dict[str, Any], list[str]]:
    """Play a task's reference solution; return the final reward, info and every observation."""
    observation, info = env.reset(seed=seed, options={"family": family, "split": split})
    observations = [observation]
    reward, done = 0.0, False
    for action in map(as_action, task_of(env_id, family, seed, split).solution):
        assert not done, "the episode ended before the reference solution did"
        observation, reward, terminated, truncated, info = env.step(action)
        observations.append(observation)
        done = terminated or truncated
    assert done
    return reward, info, observations


def play(
    env: Any, family: str, actions: list[str], seed: int = 0, split: str = "train"
) -> tuple[float, dict]:
    env.reset(seed=seed, options={"family": family, "split": split})
    return step_actions(env, actions)


Policy = Callable[[Task], list[str]]


def run_episodes(
    env_id: str,
    jobs: list[tuple[str, int]],
    policy: Policy,
    *,
    split: str = "train",
    threads: int = 8,
    **env_kwargs: Any,
) -> dict[tuple[str, int], tuple[float, dict[str, Any]]]:
    """Play `policy` on each (family, seed) with `threads` episodes at once (each thread its own env,
    all sharing the warm pool): containers are I/O for this process, so threads overlap them."""
    local = threading.local()
    envs: list[Any] = []
    lock = threading.Lock()

    def one(job: tuple[str, int]) -> tuple[float, dict[str, Any]]:
        if not hasattr(local, "env"):
            local.env = ENV_CLASSES[env_id](split=split, **env_kwargs)
            with lock:
                envs.append(local.env)
        family, seed = job
        return play(local.env, family, policy(task_of(env_id, family, seed, split)), seed=seed, split=split)

    try:
        with ThreadPoolExecutor(threads) as pool:
            return dict(zip(jobs, pool.map(one, jobs), strict=True))
    finally:
        for env in envs:
            env.close()
