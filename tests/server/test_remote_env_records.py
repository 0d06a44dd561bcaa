"""`RemoteEnv` as a local env: its tools are the episode's own, and it returns its trajectory record."""

from __future__ import annotations

import gymnasium as gym

import agentrl  # noqa: F401  (registers the ids)
from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread

FLIGHTS = "agentrl/Flights-v0"


def test_remote_tools_follow_the_granularity_and_the_record_matches_the_local_one():
    call = '{"name": "search_flights", "arguments": {"origin": "XXX", "destination": "YYY"}}'
    action = f"<tool_call>{call}</tool_call>"
    with serve_in_thread(ServerConfig(env_ids=(FLIGHTS,))) as url:
        for granularity in ("coarse", "fine"):
            remote = gym.make(FLIGHTS, base_url=url, granularity=granularity).unwrapped
            local = gym.make(FLIGHTS, granularity=granularity).unwrapped
            try:
                _, remote_info = remote.reset(seed=3)
                _, local_info = local.reset(seed=3)
                assert [t["function"]["name"] for t in remote.tools] == [
                    t["function"]["name"] for t in local_info["tools"]
                ]
                assert remote.tools == remote_info["tools"]
                remote.step(action)
                local.step(action)
                assert remote.trajectory() == local.trajectory()
                assert remote.trajectory()["env_id"] == FLIGHTS
            finally:
                remote.close()
                local.close()
