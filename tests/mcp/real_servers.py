"""What the tests of MCP-v0 over the real servers (mcp-server-git, mcp-server-time) share: where the
servers are on this machine, the git tasks (generated once per test session), the env over them, and
a player that drives an episode's tool calls from a function (an oracle or a hack)."""

from __future__ import annotations

import functools
import json
import warnings
from pathlib import Path
from typing import Any

from mcp_helpers import call
from support import unavailable

# the servers of the sandbox image, on the host too: docker/mcp_servers.sh makes this virtualenv
SERVERS = Path(__file__).resolve().parents[2] / ".venvs" / "mcp-servers" / "bin"
GIT_COUNT = 10  # tasks per split: every family, blame and diff_files twice


class ToolFailed(Exception):
    """A tool call the env answered with an error."""


def server(argv: list[str]) -> list[str]:
    """`argv` with its program taken from the servers' virtualenv."""
    program = SERVERS / argv[0]
    if not program.exists():
        unavailable(f"{program} is missing: bash docker/mcp_servers.sh")
    return [str(program), *argv[1:]]


@functools.lru_cache(maxsize=1)
def git_tasks() -> tuple[dict[str, Any], ...]:
    from agentrl.mcp.git_tasks import make_tasks

    return tuple(make_tasks(GIT_COUNT, seed=0))


def make_env(argv: list[str], tasks: list[dict[str, Any]], split: str = "test", **kwargs: Any):
    """MCP-v0 over a real server in process isolation (the warning it gives is another test's)."""
    import gymnasium as gym

    import agentrl  # noqa: F401  (registers the ids)
    from agentrl.mcp.env import IsolationWarning

    kwargs = {"isolation": "process", "pool_size": 0, "max_turns": 40, **kwargs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IsolationWarning)
        return gym.make("agentrl/MCP-v0", server=server(argv), tasks=tasks, split=split, **kwargs).unwrapped


def tool_caller(env):
    """A tool call through the env's `step`: the result's text, or ToolFailed with the error's."""

    def call_tool(name: str, arguments: dict[str, Any]) -> str:
        observation, _, terminated, truncated, _ = env.step(call(name, **arguments))
        assert not (terminated or truncated), observation
        body = json.loads(observation.removeprefix("<tool_response>\n").removesuffix("\n</tool_response>"))
        if "error" in body:
            raise ToolFailed(body["error"])
        return body["content"]

    return call_tool


def play(env, task_id: str, policy) -> tuple[float, dict[str, Any], str]:
    """One episode of `task_id`: `policy(task, call_tool)` plays it from what the agent sees (the task's
    family and the reset observation as its prompt) and gives the answer `finish` gets. The reward,
    the final info, and the reset observation and info as text (to look for leaks in)."""
    observation, info = env.reset(options={"task_id": task_id})
    answer = policy({"family": info["family"], "prompt": observation}, tool_caller(env))
    _, reward, terminated, _, final_info = env.step(call("finish", answer=answer))
    assert terminated
    return reward, final_info, observation + json.dumps(info)
