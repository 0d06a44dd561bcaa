"""`agentrl cluster roll` while episodes step: every holder is replaced, one at a time (a new one
added, the old one drained with a bound), and no episode is lost or changed: those a drained holder
still held past the bound are replayed by their client on another holder, with the same
observations, rewards and end flags as in-process. The p99 step latency during the roll is printed."""

from __future__ import annotations

import asyncio
import sys
import time

import gymnasium as gym
import pytest
from cluster_helpers import ECHO, FLIGHTS, START_TIMEOUT_S, ServedCluster, check_rolled, latencies

import agentrl  # noqa: F401  (registers the env ids)
from agentrl.client import AsyncEnvClient
from agentrl.core import tool_call as call
from agentrl.server.cluster.pool import StaticPool, cluster_app
from agentrl.serving.roll import RollError, roll

SHORT, LONG = 12, 4  # episodes stepping at once: short ones (ended and begun again), long ones
LONG_TURNS = 400  # a long episode outlasts the roll: its holder is stopped under it, past the bound
WITHIN_S = 1.5


def action(env_id: str, seed: int, k: int) -> str:
    """Step `k` of the episode of `seed`: tool calls, a malformed one, plain text."""
    if env_id == ECHO:
        pool = [call("echo", text=f"{seed}-{k}"), "no call here"]
    else:
        pool = [call("search_flights", origin="JFK", destination="LAX", date=f"2025-03-0{seed % 9 + 1}"),
                "<tool_call>{not json</tool_call>", "thinking out loud"]
    return pool[(seed + k) % len(pool)]


def in_process(env_id: str, seed: int, env_kwargs: dict, steps: int) -> list[tuple]:
    env = gym.make(env_id, **env_kwargs).unwrapped
    try:
        seen = [(env.reset(seed=seed)[0],)]
        for k in range(steps):
            observation, reward, terminated, truncated, _ = env.step(action(env_id, seed, k))
            seen.append((observation, reward, terminated, truncated))
        return seen
    finally:
        env.close()


def test_a_drain_s_bound_is_a_duration_and_a_roll_of_servers_run_elsewhere_changes_nothing():
    """The address of servers run by something else refuses the add a roll begins with: the roll
    stops there, nothing drained."""
    from fastapi.testclient import TestClient

    with TestClient(cluster_app(StaticPool({"h0": "http://127.0.0.1:9", "h1": "http://127.0.0.1:9"}), 2,
                                None)) as http:
        with pytest.raises(RollError, match="adding a holder in place of h0 failed \\(409\\)"):
            roll(http, "", WITHIN_S, load_field="live_episodes", say=print)
        assert {h["state"] for h in http.get("/v1/cluster").json()["holders"]} <= {"starting", "down"}
        assert http.post("/v1/cluster/holders/h0/drain", json={"within_s": -1}).status_code == 422
        drained = http.post("/v1/cluster/holders/h0/drain", json={"within_s": 30})
        assert drained.status_code == 200 and drained.json()["state"] == "draining"


@pytest.mark.slow
def test_a_rolling_restart_loses_no_episode():
    served = ServedCluster("processes", 2)
    try:
        before = {h["holder"] for h in served.wait_up(2)}
        runs, step_ms, stats, (code, out) = asyncio.run(_roll_under_load(served))
        check_rolled(served, before, code, out, "live_episodes")
        divergent = [(e, s) for e, s, kw, seen in runs if seen != in_process(e, s, kw, len(seen) - 1)]
        assert divergent == [] and stats.lost == 0
        assert stats.episodes >= 1  # the long episodes a drained holder still held were replayed
        assert len(runs) > SHORT + LONG and len(step_ms) > 100
        print(f"\nrolling restart: {len(runs)} episodes, {len(step_ms)} steps during the roll, "
              f"{latencies(step_ms)}, {stats.episodes} replayed")
    finally:
        served.stop()


async def _roll_under_load(served: ServedCluster):
    """Episodes stepping while `agentrl cluster roll` runs; returns each episode's (env, seed,
    env kwargs, answers), the latencies of the steps during the roll, the client's replay stats
    and the roll's exit code and output."""
    runs: list[tuple[str, int, dict, list[tuple]]] = []
    step_ms: list[float] = []
    rolling, rolled = asyncio.Event(), asyncio.Event()
    seeds = iter(range(1000, 10**6))

    async def worker(client: AsyncEnvClient, long: bool) -> None:
        while not rolled.is_set():
            seed = next(seeds)
            env_id = FLIGHTS if long or seed % 2 else ECHO
            kwargs = {"max_turns": LONG_TURNS} if long else {}
            made = await client.create_episode(env_id, seed=seed, env_kwargs=kwargs)
            seen = [(made.observation,)]
            runs.append((env_id, seed, kwargs, seen))
            for k in range(LONG_TURNS):
                if rolled.is_set() and (long or k >= 6):
                    break
                began = time.monotonic()
                out = await client.step(made.episode_id, action(env_id, seed, k))
                if rolling.is_set() and not rolled.is_set():
                    step_ms.append((time.monotonic() - began) * 1000)
                seen.append((out.observation, out.reward, out.terminated, out.truncated))
                if out.terminated or out.truncated:
                    break
                await asyncio.sleep(0.05 if long else 0.01)
            await client.close_episode(made.episode_id)

    async with AsyncEnvClient(served.discovery) as client:
        workers = [asyncio.create_task(worker(client, i < LONG)) for i in range(SHORT + LONG)]
        await asyncio.sleep(1.0)
        rolling.set()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentrl", "cluster", "roll", "--url", served.url,
            "--within", str(WITHIN_S),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=2 * START_TIMEOUT_S)
        rolled.set()
        await asyncio.wait_for(asyncio.gather(*workers), timeout=START_TIMEOUT_S)
        return runs, step_ms, client.cluster.stats, (proc.returncode, out.decode())
