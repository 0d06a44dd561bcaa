"""What one replay costs: an episode whose holder is lost, replayed alone on the other holder.

    .venv/bin/python bench/replay.py            # 16 episodes of 6 steps per env (~1 minute)
    .venv/bin/python bench/replay.py --quick    # 6 episodes per env (CI)

`agentrl serve --processes 2` (Echo-v0 and Flights-v0) on a free loopback port and one
`AsyncEnvClient` given its discovery URL. Per env: `--episodes` episodes live, each stepped
`--steps` times one call at a time (the live steps through the cluster, timed); then one holder is
SIGKILLed while they all wait, and each episode steps once more, one after another, so that the
episodes of the killed holder are replayed one at a time with nothing else in flight. From the
client's own count (`cluster.stats`) per replay: the new episode's create (a world's build) apart,
and the rest of the replay over the steps replayed, "ms per replayed step". The baselines, in the
same run: the same seeds and actions stepped in this process (`gym.make`), and the live steps
through the cluster. The aim: a replayed step costs at most 2x a live step. Also given: the whole
call that found its holder gone (what the caller waited: the retry that finds the holder gone, the
create, the replay and the call itself). Exit 1 when an episode was lost or none was replayed.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import signal
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
from rich.console import Console
from rich.table import Table

import agentrl  # noqa: F401  (registers the env ids)
from agentrl.client import AsyncEnvClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serving import ECHO, FLIGHTS, action, holder_pid, served  # bench/serving.py


def in_process_step_s(env_id: str, episodes: int, steps: int) -> float:
    """Median seconds of one step, the same seeds and actions as the cluster's episodes, here."""
    env = gym.make(env_id)
    env.reset(seed=episodes)  # a warm-up episode: the first step of a process imports and builds more
    env.step(action(env_id, 0))
    took = []
    for k in range(episodes):
        env.reset(seed=k)
        for i in range(steps):
            began = time.perf_counter()
            env.step(action(env_id, i))
            took.append(time.perf_counter() - began)
    env.close()
    return float(np.median(took))


async def replay_alone(url: str, env_id: str, episodes: int, steps: int) -> dict[str, float]:
    """Live steps, then one holder killed and each episode stepped once more, one at a time: medians
    of the live step, of each replay's create, of its ms per replayed step and of the whole call."""
    client = AsyncEnvClient(url)
    router = client.cluster.router
    made = [await client.create_episode(env_id, seed=k) for k in range(episodes)]
    live = []
    for episode in made:
        for i in range(steps):
            began = time.perf_counter()
            await client.step(episode.episode_id, action(env_id, i))
            live.append(time.perf_counter() - began)
    victim = router.recipes[made[0].episode_id].holder
    os.kill(holder_pid(router.map[victim].url), signal.SIGKILL)
    creates, per_step, calls, lost = [], [], [], 0
    for episode in made:
        before = dataclasses.replace(router.stats)
        began = time.perf_counter()
        try:
            await client.step(episode.episode_id, action(env_id, steps))
        except Exception as exc:  # counted: the aim is that none is lost
            print(f"{env_id} episode {episode.episode_id} lost: {exc!r}", flush=True)
            lost += 1
            continue
        took, after = time.perf_counter() - began, router.stats
        if after.episodes > before.episodes:
            create = after.create_seconds - before.create_seconds
            creates.append(create)
            per_step.append((after.seconds - before.seconds - create) / (after.steps - before.steps))
            calls.append(took)
    await client.aclose()
    median = lambda values: float(np.median(values)) * 1e3 if values else float("nan")  # noqa: E731
    return {"live_ms": median(live), "replays": len(per_step), "create_ms": median(creates),
            "replayed_step_ms": median(per_step), "call_ms": median(calls), "lost": lost}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="6 episodes per env")
    parser.add_argument("--episodes", type=int, default=None, help="episodes per env (half are replayed)")
    parser.add_argument("--steps", type=int, default=6, help="steps of each episode before the kill")
    args = parser.parse_args()
    if not 1 <= args.steps <= 7:
        parser.error("--steps must be 1 to 7: an Echo-v0 episode ends at its 8th turn")
    episodes = args.episodes or (6 if args.quick else 16)
    console = Console()
    console.print(f"{episodes} episodes of {args.steps} steps per env; load average at start "
                  f"{os.getloadavg()[0]:.2f}")
    table = Table(title="one replay at a time, 2 processes (medians)")
    for col in ("env", "replays", "step in-process (ms)", "live step via cluster (ms)", "create (ms)",
                "ms per replayed step", "x in-process", "x live via cluster", "call that replayed (ms)",
                "lost", "load avg"):
        table.add_column(col, justify="right")
    failed = False
    for env_id in (ECHO, FLIGHTS):
        local = in_process_step_s(env_id, episodes, args.steps) * 1e3
        with served("processes", (ECHO, FLIGHTS)) as url:
            got = asyncio.run(replay_alone(url, env_id, episodes, args.steps))
        row = [env_id.split("/")[1], str(got["replays"]), f"{local:.3f}", f"{got['live_ms']:.3f}",
               f"{got['create_ms']:.1f}", f"{got['replayed_step_ms']:.3f}",
               f"{got['replayed_step_ms'] / local:.1f}", f"{got['replayed_step_ms'] / got['live_ms']:.2f}",
               f"{got['call_ms']:.1f}", str(got["lost"]), f"{os.getloadavg()[0]:.1f}"]
        table.add_row(*row)
        console.print(" | ".join(row))
        failed |= bool(got["lost"]) or not got["replays"]
    console.print(table)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
