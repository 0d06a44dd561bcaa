"""Helpers shared by the Bash-v0 / Code-v0 tests (a uniquely named module)."""

from __future__ import annotations

import json
from typing import Any

from agentrl.code_envs.tasks import as_action


def call(name: str, **arguments: Any) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def reference_actions(env_id: str, task_id: str) -> list[str]:
    from agentrl.code_envs import bash_tasks, code_tasks

    tasks = bash_tasks if env_id == "agentrl/Bash-v0" else code_tasks
    return [as_action(c) for c in tasks.get_task(task_id).solution]


def play_reference(
    env: Any, task_id: str, seed: int = 0, env_id: str = "agentrl/Bash-v0"
) -> tuple[float, dict[str, Any], list[str]]:
    """Play a task's reference solution; return the final reward, info and every observation."""
    observation, info = env.reset(seed=seed, options={"task_id": task_id})
    observations = [observation]
    reward, done = 0.0, False
    for action in reference_actions(env_id, task_id):
        assert not done, "the episode ended before the reference solution did"
        observation, reward, terminated, truncated, info = env.step(action)
        observations.append(observation)
        done = terminated or truncated
    assert done
    return reward, info, observations


def play(env: Any, task_id: str, actions: list[str], seed: int = 0, **options: Any) -> tuple[float, dict]:
    env.reset(seed=seed, options={"task_id": task_id, **options})
    reward, info = 0.0, {}
    for action in actions:
        _, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    return reward, info
