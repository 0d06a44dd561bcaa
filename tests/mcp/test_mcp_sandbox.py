"""MCP-v0 in sandbox isolation (the default): the server runs behind the bridge in a container of the
sandbox image, which carries python3 and the MCP SDK. The notebook test server travels in the task's
files. Needs the Docker engine and the image (bash docker/engine.sh)."""

from __future__ import annotations

import gymnasium as gym
import pytest
from mcp_helpers import NOTEBOOK, call, oracle_actions, task
from support import unavailable

from agentrl.mcp import bridge
from agentrl.testing.plays import needs_docker

SERVER = ["python3", "{workspace}/server/notebook.py", "--dir", "{workspace}"]


@pytest.fixture
def sandboxed_task():
    if (reason := needs_docker({})) is not None:
        unavailable(reason)
    raw = task(
        "sandboxed-0", prompt="The notebook is {workspace}/notebook.json. Store b=2, then answer note a."
    )
    raw["setup"]["files"]["server/notebook.py"] = NOTEBOOK.read_text()
    return raw


def test_a_sandboxed_server_plays_an_episode_and_its_failures_are_observations(sandboxed_task):
    env = gym.make("agentrl/MCP-v0", server=SERVER, tasks=[sandboxed_task], pool_size=1, call_timeout_s=2.0)
    try:
        observation, info = env.reset(seed=0)
        assert observation.startswith("The notebook is /workspace/notebook.json.")  # the container's workdir
        steps = [env.step(action) for action in oracle_actions(sandboxed_task)]
        assert steps[1][0] == '<tool_response>\n{"name": "get", "content": "1"}\n</tool_response>'
        assert steps[-1][1:3] == (1.0, True)
        # the next episode takes the warm server, in a fresh container
        env.reset(seed=0)
        observation = env.step(call("keys") + call("junk") + call("huge", megabytes=2))[0]
        assert '"content": "a, seeded"' in observation
        assert "ignored: ['this is not json']" in observation
        assert "[the result was 2,097,152 characters; clipped to 16,384]" in observation
        observation, reward, terminated, _, info = env.step(call("hang"))
        assert (reward, terminated) == (0.0, True)
        assert info["error"].startswith("the MCP server failed (timeout): no answer within 2.0 s")
    finally:
        env.close()


def test_a_crashed_server_or_a_dead_bridge_ends_the_episode_saying_so(sandboxed_task):
    env = gym.make("agentrl/MCP-v0", server=SERVER, tasks=[sandboxed_task], pool_size=0, call_timeout_s=5.0)
    try:
        env.reset(seed=0)
        _, reward, terminated, _, info = env.step(call("crash"))
        assert (reward, terminated) == (0.0, True)
        assert info["error"].startswith("the MCP server failed (crashed)"), info["error"]
        env.reset(seed=0)
        # the bridge killed under the episode, and gone once its port listens no more (its last
        # thread may outlive the process as pgrep sees it): the port refuses the next call
        # (the pattern's "[.]" keeps pkill's own shell, whose line holds the pattern, from matching)
        listening = f":{bridge.PORT:04X} 00000000:0000 0A"
        wait = f"while grep -q '{listening}' /proc/net/tcp; do sleep 0.01; done"
        sandbox = env.unwrapped.server.sandbox
        killed = sandbox.exec(f"pkill -9 -f '[.]agentrl-mcp/ready' && {wait}", mode="oneshot")
        assert killed.exit_code == 0, killed
        _, reward, terminated, _, info = env.step(call("get", key="a"))
        assert (reward, terminated) == (0.0, True)
        assert info["error"].startswith(
            "the MCP server failed (crashed): the bridge to the server did not answer (refused"
        ), info["error"]
    finally:
        env.close()
