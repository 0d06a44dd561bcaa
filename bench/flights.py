"""Flights-v0 in-process speed: reset and step latency, and oracle episodes per second.

Baseline, measured in the same run: setting up each episode's database by building the world's
rows through the ORM one by one, instead of copying the cached template with SQLite's backup API.

    python bench/flights.py                  # 1-day and 30-day schedules
    python bench/flights.py --days 1 --episodes 300
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import gymnasium as gym
from rich.console import Console
from rich.table import Table

import agentrl  # noqa: F401  (registers the ids)
from agentrl.flights.oracle import OraclePolicy
from agentrl.flights.world import WORLDS, build_row_by_row, new_engine


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(days: int, episodes: int, baseline_reps: int) -> dict[str, float]:
    env = gym.make("agentrl/Flights-v0", days=days, world_pool=4).unwrapped
    for s in range(4):  # warm the template cache: generation is a one-off per world
        env.reset(seed=s)
    resets, steps = [], []
    start = time.perf_counter()
    for s in range(episodes):
        t = time.perf_counter()
        observation, info = env.reset(seed=s)
        resets.append(time.perf_counter() - t)
        policy, done = OraclePolicy(), False
        while not done:
            action = policy(observation, info)
            t = time.perf_counter()
            observation, _r, terminated, truncated, info = env.step(action)
            steps.append(time.perf_counter() - t)
            done = terminated or truncated
    elapsed = time.perf_counter() - start
    engine, world = new_engine(), WORLDS.get(0, days)
    baseline = []
    for _ in range(baseline_reps):
        t = time.perf_counter()
        build_row_by_row(world, engine)
        baseline.append(time.perf_counter() - t)
    env.close()
    return {
        "reset_med": statistics.median(resets),
        "reset_p99": pct(resets, 0.99),
        "step_med": statistics.median(steps),
        "step_p99": pct(steps, 0.99),
        "eps": episodes / elapsed,
        "base_med": statistics.median(baseline),
        "base_p99": pct(baseline, 0.99),
        "steps_per_ep": len(steps) / episodes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, nargs="+", default=[1, 30])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--baseline-reps", type=int, default=3)
    args = parser.parse_args()
    console = Console()
    table = Table(title="Flights-v0 in-process (oracle episodes; ms unless stated)")
    for col in ("days", "metric", "median", "p99", "baseline median", "ratio (baseline / this)"):
        table.add_column(col, justify="right")
    for days in args.days:
        r = measure(days, args.episodes, args.baseline_reps)
        ms = 1000.0
        table.add_row(
            str(days),
            "reset (template copy)",
            f"{r['reset_med'] * ms:.2f}",
            f"{r['reset_p99'] * ms:.2f}",
            f"{r['base_med'] * ms:.0f}",
            f"{r['base_med'] / r['reset_med']:.0f}x",
        )
        table.add_row(str(days), "step", f"{r['step_med'] * ms:.3f}", f"{r['step_p99'] * ms:.3f}", "-", "-")
        table.add_row(
            str(days),
            f"episodes/s ({r['steps_per_ep']:.1f} steps/ep)",
            f"{r['eps']:.0f}",
            "-",
            f"{1 / r['base_med']:.2f}",
            f"{r['eps'] * r['base_med']:.0f}x",
        )
    console.print(table)
    console.print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )


if __name__ == "__main__":
    main()
