"""OpenEnv's own client (the `openenv-core` package) drives agentrl envs over the `/ws` protocol."""

from __future__ import annotations

import asyncio
import json

import gymnasium as gym
import httpx
import pytest
import websockets
from openenv.core.generic_client import GenericEnvClient
from server_helpers import ECHO, FLIGHTS, call

from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread


def local_transcript(env_id: str, seed: int, actions: list[str]) -> list[tuple]:
    env = gym.make(env_id)
    obs, info = env.reset(seed=seed)
    out = [(obs, None, False, False, info)]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        out.append((obs, reward, terminated, truncated, info))
    env.close()
    return out


async def openenv_transcript(url: str, seed: int, actions: list[str], **reset_extra) -> list[tuple]:
    async with GenericEnvClient(base_url=url) as client:
        result = await client.reset(seed=seed, **reset_extra)
        steps = [result]
        for action in actions:
            steps.append(await client.step({"action": action}))
        state = await client.state()
    assert state["step_count"] == len(actions)
    out = []
    for r in steps:
        o = r.observation
        assert r.done == (o["terminated"] or o["truncated"])
        out.append((o["text"], r.reward, o["terminated"], o["truncated"], o["info"]))
    return out


@pytest.mark.parametrize("env_id", [ECHO, FLIGHTS])
def test_openenv_client_plays_like_the_local_env(base_url, env_id):
    actions = [call("echo", text="hi"), "not a call", call("finish", answer="golf")]
    expected = local_transcript(env_id, 11, actions)
    via_path = asyncio.run(openenv_transcript(f"{base_url}/openenv/{env_id}", 11, actions))
    via_reset = asyncio.run(openenv_transcript(base_url, 11, actions, env_id=env_id))
    assert via_path == expected
    assert via_reset == expected


def test_openenv_session_is_an_episode_and_closing_the_socket_frees_it(base_url):
    async def main():
        async with GenericEnvClient(base_url=f"{base_url}/openenv/{ECHO}") as client:
            first = await client.reset(seed=1)
            live = httpx.get(f"{base_url}/health").json()["live_episodes"]
            status = httpx.get(f"{base_url}/v1/episodes/{first.observation['episode_id']}").json()
            # a second reset starts over on the same env instance
            again = await client.reset(seed=1)
            assert again.observation["episode_id"] == first.observation["episode_id"]
            assert again.observation["text"] == first.observation["text"]
            return live, status

    live, status = asyncio.run(main())
    assert live >= 1 and status["env_id"] == ECHO and status["status"] == "running"
    for _ in range(100):
        if httpx.get(f"{base_url}/health").json()["live_episodes"] == live - 1:
            break
        asyncio.run(asyncio.sleep(0.02))
    else:
        pytest.fail("the episode of a closed socket was not freed")


def test_openenv_errors_use_its_codes(base_url):
    async def main():
        async with websockets.connect(base_url.replace("http", "ws") + "/ws") as ws:
            replies = []
            messages = [
                {"type": "jump"},
                {"type": "step", "data": {"action": "x"}},
                {"type": "reset", "data": {"seed": 1}},
                {"type": "reset", "data": {"env_id": "agentrl/Nope-v0"}},
                {"type": "reset", "data": {"env_id": ECHO, "env_kwargs": {"max_turns": 1}}},
                {"type": "step", "data": {"action": "x"}},
                {"type": "step", "data": {"action": "y"}},
                {"type": "step", "data": {}},
            ]
            for message in ["{nope", *map(json.dumps, messages)]:
                await ws.send(message)
                replies.append(json.loads(await ws.recv()))
            return replies

    replies = asyncio.run(main())
    codes = [r["data"].get("code") if r["type"] == "error" else r["type"] for r in replies]
    assert codes == ["INVALID_JSON", "UNKNOWN_TYPE", "EXECUTION_ERROR", "SESSION_ERROR", "SESSION_ERROR",
                     "observation", "observation", "EXECUTION_ERROR", "VALIDATION_ERROR"]
    assert replies[6]["data"]["done"] is True and replies[6]["data"]["observation"]["truncated"] is True
    assert "over" in replies[7]["data"]["message"]


def test_openenv_capacity_and_auth():
    async def main(url):
        async with GenericEnvClient(base_url=f"{url}/openenv/{ECHO}") as first:
            await first.reset()
            second = GenericEnvClient(base_url=f"{url}/openenv/{ECHO}")
            with pytest.raises(RuntimeError, match="CAPACITY_REACHED"):
                await second.reset()
            await second.close()

    with serve_in_thread(ServerConfig(max_episodes=1, token="tok")) as url:
        with pytest.raises(ConnectionError):
            asyncio.run(GenericEnvClient(base_url=f"{url}/openenv/{ECHO}").connect())
        # OpenEnv's client cannot send headers; the token may ride in the query string
        async def with_token():
            async with websockets.connect(f"{url.replace('http', 'ws')}/openenv/{ECHO}/ws?token=tok") as ws:
                await ws.send(json.dumps({"type": "reset", "data": {"seed": 2}}))
                return json.loads(await ws.recv())

        assert asyncio.run(with_token())["type"] == "observation"
    with serve_in_thread(ServerConfig(max_episodes=1)) as url:
        asyncio.run(main(url))
