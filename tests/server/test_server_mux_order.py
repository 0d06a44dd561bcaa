"""`/v1/ws` steps a connection's frames first come, first served, so every episode waits one round."""

from __future__ import annotations

import asyncio
import json

import httpx
from server_helpers import ECHO, call
from websockets.sync.client import connect

from agentrl.client import AsyncEnvClient

KEY = "mux-order"  # the creating client's key, shared by the client that steps (`agentrl.server.owners`)


def _episodes(base_url: str, n: int) -> list[str]:
    async def main() -> list[str]:
        async with AsyncEnvClient(base_url, client_key=KEY) as client:
            made = await asyncio.gather(*(client.create_episode(ECHO, seed=s, env_kwargs={"max_turns": 10**6})
                                          for s in range(n)))
            return [m.episode_id for m in made]

    return asyncio.run(main())


def test_a_small_frame_behind_a_large_one_is_answered_after_it(base_url):
    """The large frame needs several time slices; a one-step frame read while it is under way waits
    for it instead of overtaking it (which, round after round, would answer the same small frames'
    episodes early and the large frames' late)."""
    many = _episodes(base_url, 200)
    large = {"id": 1, "steps": [{"episode_id": e, "action": call("echo", text="x" * 200)} for e in many * 3]}
    small = {"id": 2, "steps": [{"episode_id": many[0], "action": call("echo", text="y")}]}
    warm = {"id": 0, "steps": [{"episode_id": e, "action": call("echo", text="w")} for e in many]}
    with connect(base_url.replace("http://", "ws://") + "/v1/ws", compression=None, proxy=None) as ws:
        ws.send(json.dumps(warm).encode())  # the server learns that Echo-v0's steps run on its loop
        assert json.loads(ws.recv(timeout=60))["id"] == 0
        ws.send(json.dumps(large).encode())
        ws.send(json.dumps(small).encode())
        replies = [json.loads(ws.recv(timeout=60)) for _ in range(2)]
    assert [r["id"] for r in replies] == [1, 2]
    assert all(r["status"] == 200 for r in replies[0]["results"]) and len(replies[0]["results"]) == 600
    # the small frame's step ran after the large frame's three steps of the same episode
    assert replies[1]["results"][0]["result"]["info"]["turn"] == 5


def test_every_coroutine_gets_its_turn_in_each_round(base_url):
    """256 coroutines stepping back to back over one connection: none falls behind the others."""
    episodes = _episodes(base_url, 256)

    async def main() -> list[int]:
        counts = [0] * len(episodes)
        async with AsyncEnvClient(base_url, client_key=KEY) as client:
            async def run(i: int) -> None:
                while sum(counts) < 6 * len(episodes):
                    await client.step(episodes[i], call("echo", text="z"))
                    counts[i] += 1

            await asyncio.gather(*(run(i) for i in range(len(episodes))))
        return counts

    counts = asyncio.run(main())
    assert min(counts) >= 5 and max(counts) - min(counts) <= 1
    statuses = httpx.get(f"{base_url}/v1/episodes/{episodes[0]}").json()
    assert statuses["turns"] == counts[0]
