"""Chaos run of a cluster: episodes through the cluster client while holders are SIGKILLed at random.

    .venv/bin/python bench/chaos.py            # >= 1,000 episodes and >= 20 kills, a kill every 3 s
    .venv/bin/python bench/chaos.py --quick    # >= 120 episodes and >= 3 kills, every 1.5 s (~10 s)
    .venv/bin/python bench/chaos.py --ray      # the holders are Ray actors (a local Ray on loopback)

`agentrl serve --processes 2` (Echo-v0 and Flights-v0; with `--ray`, two Ray actors of a local Ray
started on loopback, and a kill SIGKILLs an actor's worker process) on a free loopback port; one
`AsyncEnvClient` given its discovery URL runs `--concurrency` episodes at a time, half Echo-v0 and
half Flights-v0, each a fixed script of steps by its seed (tool calls, a malformed one, plain text; an Echo-v0
episode ends answering the secret word its first observation told, so rewards are not all 0), then
reads the episode's trajectory record and closes it. Meanwhile a killer SIGKILLs a random holder
every `--kill-every` seconds, at random within that period; the supervisor starts the holder again
where it was, and where it will not any more (its restarts spent) the killer adds a holder, as an
operator would (`agentrl cluster add`). The killer waits until every holder is up before the next
kill: a kill while no other holder is up loses episodes by design (`no_holder`, see docs/cluster.md).

Episodes go on (seeds counting up) until both the episode count and the kill count are reached,
so a fast machine does not finish before the first kill; a run that cannot reach them in
`MAX_SECONDS` stops there and says so.

Every episode's observations, rewards and trajectory record are then compared with the same seed
and script run in-process. Reported: episodes run, kills, replays (the client's count) and episodes
replayed, episodes lost (any call that raised), divergences (an episode whose answers differ from
in-process), step latency p50/p99 away from kills and in the `RECOVERY_S` after each, and per kill
the time to the first step served again to an episode the killed holder held. Exit 1 when any
episode is lost or diverges, or fewer kills landed than wanted. Everything is on loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import httpx
import numpy as np

import agentrl  # noqa: F401  (registers the env ids)
from agentrl.client import AsyncEnvClient
from agentrl.flights.task_ids import KEY_VARIABLE as TASK_ID_KEY_VARIABLE
from agentrl.server.local import free_port

sys.path.insert(0, str(Path(__file__).resolve().parent))
import processes  # bench/processes.py: servers started, awaited and stopped
from cluster import _holder_pid  # bench/cluster.py: the process listening on a holder's port

ECHO, FLIGHTS = "agentrl/Echo-v0", "agentrl/Flights-v0"
RECOVERY_S = 2.0  # steps in flight at a kill or begun this long after it count as "during recovery"
MIN_KILLS, QUICK_MIN_KILLS = 20, 3  # what a full and a quick run must reach
MAX_SECONDS = 1800.0  # a run that has not reached its counts by then stops


def _call(name: str, **arguments: Any) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def script(env_id: str, seed: int, first_observation: str) -> list[str]:
    """Episode `seed`'s actions: fixed by the seed, and for Echo-v0 a last `finish` with the secret
    word its first observation names (reward 1) or a wrong one (reward 0), by the seed's parity."""
    if env_id == ECHO:
        pool = [_call("echo", text=f"{seed}-{i}") for i in range(3)] + ["no call here", "<tool_call>{bad"]
        steps = [pool[(seed + i) % len(pool)] for i in range(3 + seed % 4)]
        word = first_observation.split("'")[1] if seed % 2 == 0 else "wrong"
        return [*steps, _call("finish", answer=word)]
    pool = [_call("search_flights", origin="JFK", destination="LAX", date=f"2025-03-{seed % 28 + 1:02d}"),
            _call("search_flights", origin="SFO", destination="ORD", date="2025-04-11"),
            "<tool_call>{not json</tool_call>", "thinking out loud",
            _call("search_flights", origin="BOS", destination="SEA", date=f"2025-05-{seed % 20 + 1:02d}")]
    return [pool[(seed + i) % len(pool)] for i in range(4 + seed % 5)]


@dataclass
class Episode:
    """What one episode answered through the cluster, or how it was lost."""

    env_id: str
    seed: int
    observations: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    trajectory: dict[str, Any] | None = None
    holders: set[str] = field(default_factory=set)  # every holder that held it
    lost: str | None = None


def in_process(env_id: str, seed: int) -> tuple[list[str], list[float], dict[str, Any]]:
    """The same episode run in this process: what the cluster's answers must equal."""
    env = gym.make(env_id).unwrapped
    try:
        first = env.reset(seed=seed)[0]
        observations, rewards = [first], []
        for action in script(env_id, seed, first):
            observation, reward, terminated, truncated, _ = env.step(action)
            observations.append(observation)
            rewards.append(float(reward))
            if terminated or truncated:
                break
        return observations, rewards, json.loads(json.dumps(env.trajectory()))
    finally:
        env.close()


def differs(got: Episode) -> str | None:
    """Where the episode's answers first differ from the same episode in-process, or None."""
    observations, rewards, trajectory = in_process(got.env_id, got.seed)
    for i, (want, seen) in enumerate(zip(observations, got.observations, strict=False)):
        if want != seen:
            return f"observation {i}: {seen[:80]!r} where in-process {want[:80]!r}"
    if len(observations) != len(got.observations):
        return f"{len(got.observations)} observations where in-process {len(observations)}"
    if rewards != got.rewards:
        return f"rewards {got.rewards} where in-process {rewards}"
    if trajectory != got.trajectory:
        keys = sorted(k for k in trajectory if trajectory[k] != (got.trajectory or {}).get(k))
        return f"the trajectory record's {keys} differ"
    return None


@dataclass
class Run:
    """What the run saw: step timings (start, end, holder before the call), kills, holders added."""

    steps: list[tuple[float, float, str]] = field(default_factory=list)
    kills: list[tuple[float, str]] = field(default_factory=list)
    added: int = 0
    done: bool = False


async def _episode(client: AsyncEnvClient, run: Run, env_id: str, seed: int) -> Episode:
    got = Episode(env_id, seed)
    router = client.cluster.router  # type: ignore[union-attr]  # a cluster's client
    try:
        made = await client.create_episode(env_id, seed=seed)
        eid = made.episode_id
        got.observations.append(made.observation)
        for action in script(env_id, seed, made.observation):
            holder = router.recipes[eid].holder
            got.holders.add(holder)
            began = time.perf_counter()
            result = await client.step(eid, action)
            run.steps.append((began, time.perf_counter(), holder))
            got.observations.append(result.observation)
            got.rewards.append(float(result.reward))
            if result.terminated or result.truncated:
                break
        got.holders.add(router.recipes[eid].holder)
        got.trajectory = await client.trajectory(eid)
        await client.close_episode(eid)
    except Exception as exc:  # counted and told: the aim is that none is lost
        got.lost = f"{type(exc).__name__}: {exc}"
    return got


async def _killer(url: str, run: Run, every_s: float, rng: random.Random, own: dict[str, int]) -> None:
    """SIGKILL a random holder at a random moment of each `every_s` period once every holder is up;
    add a holder in place of one its supervisor will not start again. The victim is drawn among the
    holders holding live episodes of the client (`own`: the client's count per holder), since a kill
    of an idle holder tests nothing."""
    async with httpx.AsyncClient(timeout=30) as http:
        while not run.done:
            await asyncio.sleep(rng.uniform(0.2, 1.0) * every_s)
            while not run.done:
                holders = (await http.get(url)).json()["holders"]
                down = [h for h in holders if h["state"] == "down"]
                if down and len(holders) - len(down) < 2:
                    await http.post(f"{url}/holders", json={"n": 1})
                    run.added += 1
                    continue
                up = [h for h in holders if h["state"] == "up"]
                if len(up) >= 2 and not any(h["state"] == "starting" for h in holders):
                    break
                await asyncio.sleep(0.1)
            if run.done:
                return
            busy = [h for h in up if own.get(h["holder"], 0) > 0]
            victim = rng.choice(busy or up)
            try:
                pid = await asyncio.to_thread(_holder_pid, victim["url"])
            except RuntimeError:  # the map still calls it up after it went: the next period tries again
                continue
            os.kill(pid, signal.SIGKILL)
            run.kills.append((time.perf_counter(), victim["holder"]))
            await _back(http, url, victim)


async def _back(http: httpx.AsyncClient, url: str, victim: dict[str, Any]) -> None:
    """Until the killed holder answers again (started anew) or is down for good: the map says `up`
    for up to a health check's interval after a kill, and the next kill must not take the last holder."""
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if (await http.get(f"{victim['url']}/health", timeout=1)).status_code == 200:
                return
        holders = (await http.get(url)).json()["holders"]
        if any(h["holder"] == victim["holder"] and h["state"] == "down" for h in holders):
            return
        await asyncio.sleep(0.05)


async def _chaos(url: str, episodes: int, min_kills: int, concurrency: int, every_s: float,
                 seed: int) -> tuple[list[Episode], Run, Any]:
    """`concurrency` workers run episodes (Flights-v0 on even seeds, Echo-v0 on odd) until at least
    `episodes` have run and `min_kills` kills have landed, or `MAX_SECONDS` passed."""
    run = Run()
    client = AsyncEnvClient(url)
    got: list[Episode] = []
    drawn = 0
    deadline = time.perf_counter() + MAX_SECONDS

    def more() -> bool:
        wanted = drawn < episodes or len(run.kills) < min_kills
        return wanted and time.perf_counter() < deadline

    async def worker() -> None:
        nonlocal drawn
        while more():
            k, drawn = drawn, drawn + 1
            got.append(await _episode(client, run, ECHO if k % 2 else FLIGHTS, seed + k))

    own = client.cluster.router.own  # type: ignore[union-attr]  # a cluster's client
    killer = asyncio.create_task(_killer(url, run, every_s, random.Random(seed), own))
    try:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    finally:
        run.done = True
        killer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await killer
    stats = client.cluster.stats  # type: ignore[union-attr]  # a cluster's client
    await client.aclose()
    return sorted(got, key=lambda e: e.seed), run, stats


def _recovery(run: Run) -> tuple[list[float], list[float], list[float]]:
    """Step latencies (ms) away from kills and of steps in flight at a kill or begun in the `RECOVERY_S`
    after it; per kill, seconds to the
    first step that ended after it on an episode the killed holder held."""
    kill_times = [t for t, _ in run.kills]
    calm, recovering, first_served = [], [], []
    for began, ended, _ in run.steps:
        near = any(began < t + RECOVERY_S and ended > t for t in kill_times)  # in flight at the kill or after
        (recovering if near else calm).append((ended - began) * 1e3)
    for t, victim in run.kills:
        after = [ended for _, ended, holder in run.steps if holder == victim and ended > t]
        if after:
            first_served.append(min(after) - t)
    return calm, recovering, first_served


def _p(values: list[float], q: float) -> str:
    return f"{np.percentile(values, q):.1f}" if values else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=">= 120 episodes and 3 kills, every 1.5 s")
    parser.add_argument("--episodes", type=int, default=None, help="at least this many episodes")
    parser.add_argument("--concurrency", type=int, default=32, help="episodes live at once")
    parser.add_argument("--kill-every", type=float, default=None, help="seconds between kills")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ray", action="store_true", help="holders as Ray actors (`agentrl serve --ray`)")
    args = parser.parse_args()
    # one task-id key for the holders and this process: else each names a Flights-v0 task anew, and a
    # replayed episode's task_id (in its info and record) changes with its holder
    os.environ.setdefault(TASK_ID_KEY_VARIABLE, "chaos-bench-key")
    episodes = args.episodes or (120 if args.quick else 1000)
    every_s = args.kill_every or (1.5 if args.quick else 3.0)
    min_kills = QUICK_MIN_KILLS if args.quick else MIN_KILLS
    concurrency = min(args.concurrency, 16) if args.quick else args.concurrency
    print(f"at least {episodes} episodes ({ECHO}, {FLIGHTS}) and {min_kills} kills, {concurrency} at a time, "
          f"a holder killed about every {every_s} s; load average at start {os.getloadavg()[0]:.2f}",
          flush=True)

    port = free_port()
    url = f"http://127.0.0.1:{port}/v1/cluster"
    command = [sys.executable, "-m", "agentrl", "serve", "--processes", "2", "--port", str(port), "--no-ui",
               "--env", ECHO, "--env", FLIGHTS]
    if args.ray:  # every Ray service on 127.0.0.1 (Ray's single-machine switch), no usage report
        command += ["--ray", "--ray-cpus", "0.5"]
        os.environ.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_AUTH_MODE="disabled",
                          RAY_USAGE_STATS_ENABLED="0")
    with processes.started(command, lambda: processes.answers(url)):
        began = time.perf_counter()
        got, run, stats = asyncio.run(_chaos(url, episodes, min_kills, concurrency, every_s, args.seed))
        elapsed = time.perf_counter() - began
        load = os.getloadavg()

    lost = [e for e in got if e.lost is not None]
    divergent = [(e, why) for e in got if e.lost is None and (why := differs(e))]
    calm, recovering, first_served = _recovery(run)
    moved = sum(len(e.holders) > 1 for e in got)
    print(f"episodes run: {len(got)} in {elapsed:.1f} s ({len(run.steps)} steps)")
    print(f"kills: {len(run.kills)}; holders added after restarts ran out: {run.added}")
    print(f"replays: {stats.episodes} ({stats.steps} steps replayed, {stats.seconds:.1f} s); "
          f"episodes that moved holder: {moved}")
    unborn = sum(not e.observations for e in lost)  # the create raised: the caller never had the episode
    print(f"episodes lost: {len(lost)} ({unborn} whose create raised, {len(lost) - unborn} live); "
          f"divergent: {len(divergent)}")
    print(f"step latency ms, away from kills: p50 {_p(calm, 50)} p99 {_p(calm, 99)} ({len(calm)} steps); "
          f"in flight at a kill or begun {RECOVERY_S:.0f} s after: p50 {_p(recovering, 50)} "
          f"p99 {_p(recovering, 99)} "
          f"({len(recovering)} steps)")
    served = [s * 1e3 for s in first_served]
    print(f"kill to the first step served again to the killed holder's episodes, ms: median "
          f"{_p(served, 50)} max {max(served, default=float('nan')):.1f} ({len(served)} kills)")
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for e in lost[:5]:
        print(f"lost {e.env_id} seed {e.seed}: {e.lost}")
    for e, why in divergent[:5]:
        print(f"divergent {e.env_id} seed {e.seed} (holders {sorted(e.holders)}): {why}")
    # a create that raised lost nothing the caller had (it got the error); CI's quick mode, on a loaded
    # machine, tolerates a few of those, and never a live episode lost or an answer that differs
    allowed = len(got) // 20 if args.quick else 0
    if len(lost) - unborn or divergent or unborn > allowed:
        if unborn > allowed:
            print(f"creates that raised: {unborn}, more than the {allowed} allowed")
        return 1
    if len(run.kills) < min_kills:
        print(f"only {len(run.kills)} kills landed in {MAX_SECONDS:.0f} s (at least {min_kills} wanted)")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
