from __future__ import annotations

import warnings

import pytest
from support import unavailable


@pytest.fixture(autouse=True)
def _needs_the_sdk():
    try:
        import mcp  # noqa: F401
    except ImportError:
        unavailable("the MCP SDK is not installed (the [mcp] extra)")


@pytest.fixture
def make_env():
    """Build MCP-v0 envs in process isolation over the notebook server (the warning it gives is
    tested on its own); every env built is closed at the end."""
    import gymnasium as gym
    from mcp_helpers import TASKS, notebook

    import agentrl  # noqa: F401  (registers the ids)
    from agentrl.mcp.env import IsolationWarning

    built = []

    def make(**kwargs):
        kwargs = {"server": notebook(), "tasks": TASKS, "isolation": "process", "pool_size": 0, **kwargs}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IsolationWarning)
            env = gym.make("agentrl/MCP-v0", **kwargs).unwrapped
        built.append(env)
        return env

    yield make
    for env in built:
        env.close()
