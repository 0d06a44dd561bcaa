"""Rollout throughput: async per-episode workers vs a synchronous batched loop, at env latencies.

    python bench/rollouts.py [--quick]

Both loops drive the same env (Echo-v0 with an added per-step latency), the same tiny model and
the same transformers backend, and build the same token-in/token-out transcripts. The baseline is
the classic lockstep loop: one batched `generate` over all live episodes, then each env steps in
turn. The async loop runs one asyncio task per episode; generation batches whatever requests are
pending while the other episodes wait on their envs.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import platform
import time
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import gymnasium as gym
import torch
from rich.console import Console
from rich.table import Table

import agentrl  # noqa: F401
from agentrl.agent_train.backends import HFBackend
from agentrl.agent_train.models import load_model
from agentrl.agent_train.rollout import RolloutLimits, Rollouts, collect_groups
from agentrl.agent_train.transcript import Transcript
from agentrl.driver import AsyncEpisode, EnvSource

ENV = "agentrl/Echo-v0"


class Latency(gym.Wrapper):
    """Adds a fixed wall-clock delay to every step, standing in for a slow tool or remote API."""

    def __init__(self, env: gym.Env, seconds: float) -> None:
        super().__init__(env)
        self.seconds = seconds

    def step(self, action: Any) -> Any:
        time.sleep(self.seconds)
        return self.env.step(action)


@dataclass(frozen=True)
class SlowSource(EnvSource):
    """The env with `latency` seconds of waiting added to each step."""

    latency: float = 0.0

    def make(self) -> gym.Env:
        return Latency(super().make(), self.latency)


def make_driver(latency: float, max_turns: int) -> AsyncEpisode:
    return AsyncEpisode(SlowSource(ENV, env_kwargs={"max_turns": max_turns}, latency=latency))


@dataclass(frozen=True)
class Work:
    """What both loops run: the same backend, tasks, group size, limits and turns."""

    backend: HFBackend
    tok: Any
    seeds: list[int]
    group: int
    limits: RolloutLimits
    max_turns: int


def run_async(work: Work, latency: float) -> tuple[float, int, int]:
    start = time.perf_counter()
    groups = asyncio.run(
        collect_groups(
            Rollouts(lambda: make_driver(latency, work.max_turns), work.backend, work.tok, work.limits,
                     concurrency=256),
            work.seeds,
            work.group,
        )
    )
    episodes = [e for g in groups for e in g]
    assert all(e.error is None for e in episodes), [e.error for e in episodes if e.error]
    return time.perf_counter() - start, len(episodes), sum(e.transcript.generated_tokens for e in episodes)


def run_sync(work: Work, latency: float) -> tuple[float, int, int]:
    start = time.perf_counter()
    envs = [Latency(gym.make(ENV, max_turns=work.max_turns), latency)
            for _ in work.seeds for _ in range(work.group)]
    transcripts = []
    for env, seed in zip(envs, [s for s in work.seeds for _ in range(work.group)], strict=True):
        obs, _ = env.reset(seed=seed)
        t = Transcript(work.tok)
        t.start([{"role": "user", "content": obs}])
        transcripts.append(t)
    live = list(range(len(envs)))
    turn = 0
    while live:
        # one sampling seed per episode and turn, as the async loop draws them
        gens = work.backend._timed_batch(
            [transcripts[i].ids for i in live],
            [work.limits.max_new_tokens] * len(live),
            [turn * 10_000 + i for i in live],
        )
        turn += 1
        still = []
        for i, g in zip(live, gens, strict=True):
            action = transcripts[i].add_generation(g.ids, g.logprobs, g.version)
            obs, _, terminated, truncated, _ = envs[i].step(action)
            if not (terminated or truncated) and transcripts[i].add_env_message(obs):
                still.append(i)
        live = still
    for env in envs:
        env.close()
    return time.perf_counter() - start, len(envs), sum(t.generated_tokens for t in transcripts)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer episodes (seconds, not minutes)")
    parser.add_argument("--latencies", default="0,0.05,0.2", help="env step latencies in seconds")
    parser.add_argument("--model", default="tiny:2x64")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    seeds, group = (list(range(4)), 4) if args.quick else (list(range(8)), 4)
    max_turns = 3
    limits = RolloutLimits(max_new_tokens=16, token_budget=4096)
    model, tok = load_model(args.model, ENV)
    backend = HFBackend(model, tok, max_batch=256)
    work = Work(backend, tok, seeds, group, limits, max_turns)
    run_async(dataclasses.replace(work, seeds=seeds[:1], group=2), 0.0)  # warm-up

    console = Console(width=120)
    table = Table(
        title=f"Rollout throughput: {len(seeds)} tasks x {group} episodes, {max_turns} turns each, "
        f"{limits.max_new_tokens} new tokens per turn ({args.model} on transformers)"
    )
    for col in (
        "env latency / step",
        "sync eps/s",
        "async eps/s",
        "sync tok/s",
        "async tok/s",
        "async / sync",
    ):
        table.add_column(col, justify="right")
    for latency in (float(x) for x in args.latencies.split(",")):
        s_wall, s_eps, s_tok = run_sync(work, latency)
        a_wall, a_eps, a_tok = run_async(work, latency)
        ratio = (a_eps / a_wall) / (s_eps / s_wall)
        table.add_row(
            f"{latency * 1000:.0f} ms",
            f"{s_eps / s_wall:.2f}",
            f"{a_eps / a_wall:.2f}",
            f"{s_tok / s_wall:.0f}",
            f"{a_tok / a_wall:.0f}",
            f"[bold]{ratio:.2f}x[/bold]",
        )
    console.print(table)
    console.print(
        f"machine: {platform.machine()} {platform.processor() or ''} | {os.cpu_count()} cores | "
        f"torch {torch.__version__} threads={torch.get_num_threads()} | python {platform.python_version()}"
    )


if __name__ == "__main__":
    main()
