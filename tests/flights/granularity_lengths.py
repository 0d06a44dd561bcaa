"""Trajectory lengths of the Flights-v0 oracle at each granularity: steps and tool calls per episode.

The same tasks at every level (seeds base..base+n-1 of each family, levels in turn), played by
`OraclePolicy`, in the static and the stochastic world; each cell is the mean per episode.

    python tests/flights/granularity_lengths.py --seeds 40      # the table in docs/envs/flights.md
"""

from __future__ import annotations

import argparse
from typing import Any

import gymnasium as gym

import agentrl  # noqa: F401  (registers the ids)
from agentrl.flights.granularity import GRANULARITIES
from agentrl.flights.oracle import OraclePolicy
from agentrl.flights.tasks import FAMILIES, LEVELS


def play_oracle(env: Any, seed: int, options: dict[str, Any]) -> tuple[float, int, int]:
    """One oracle episode: (reward, steps, tool calls)."""
    observation, info = env.reset(seed=seed, options=options)
    policy = OraclePolicy()
    reward, steps, calls, done = 0.0, 0, 0, False
    while not done:
        observation, r, terminated, truncated, info = env.step(policy(observation, info))
        reward, steps, calls = reward + r, steps + 1, calls + len(info["calls"])
        done = terminated or truncated
    return reward, steps, calls


def lengths(granularity: str, seeds: int, split: str = "test", stochastic: bool = False) -> dict[str, Any]:
    """Per family: mean steps, mean tool calls and mean reward of the oracle's episodes."""
    base = 90_000 if split == "test" else 0
    env = gym.make(
        "agentrl/Flights-v0", granularity=granularity, split=split, stochastic=stochastic
    ).unwrapped
    table: dict[str, Any] = {}
    for family in FAMILIES:
        runs = [
            play_oracle(env, seed, {"family": family, "level": LEVELS[seed % 3]})
            for seed in range(base, base + seeds)
        ]
        table[family] = {
            key: sum(r[i] for r in runs) / len(runs) for i, key in enumerate(("reward", "steps", "calls"))
        }
    env.close()
    table["all"] = {
        key: sum(table[f][key] for f in FAMILIES) / len(FAMILIES) for key in ("reward", "steps", "calls")
    }
    return table


def markdown(rows: dict[tuple[str, str], dict[str, Any]], seeds: int, split: str) -> str:
    head = ["granularity", "world", *FAMILIES, "all", "oracle reward"]
    lines = [
        f"oracle, {split} split, {seeds} seeds per family: mean steps / tool calls per episode",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for (granularity, world), table in rows.items():
        cells = [f"{table[c]['steps']:.1f} / {table[c]['calls']:.1f}" for c in [*FAMILIES, "all"]]
        lines.append("| " + " | ".join([granularity, world, *cells, f"{table['all']['reward']:.3f}"]) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Flights-v0 oracle trajectory lengths per granularity")
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--split", choices=("train", "test"), default="test")
    args = parser.parse_args()
    rows = {
        (g, world): lengths(g, args.seeds, args.split, world == "stochastic")
        for g in GRANULARITIES
        for world in ("static", "stochastic")
    }
    print(markdown(rows, args.seeds, args.split))
