"""Every Flights-v0 hack's score on held-out seeds, per family and level, static and in the moving
world, at each granularity, with the oracle and the base rates: the tables of docs/rewards-flights.md.

    python tests/flights/flights_hack_table.py --seeds 40
    python tests/flights/flights_hack_table.py --seeds 40 --observation compact

Seeds 90000.. of the test split, every family on each seed, level `LEVELS[seed % 3]` (as the hack
suite plays them); a score is the share of episodes the hack wins. "n/a": the hack has no way to
play that family at that granularity (see NOT_APPLICABLE_AT).
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from typing import Any

from flights_hacks import TEST_BASE
from granularity_hacks import measure_at

from agentrl.flights.granularity import GRANULARITIES
from agentrl.flights.tasks import FAMILIES, LEVELS, planned_outcome

COLUMNS = [*FAMILIES, *(f"level {level}" for level in LEVELS), "all"]


def cells(episodes: list[tuple[str, int, float]]) -> dict[str, float]:
    """Mean success per family, per level and overall of (family, level, success) triples."""
    groups: dict[str, list[float]] = defaultdict(list)
    for family, level, success in episodes:
        for key in (family, f"level {level}", "all"):
            groups[key].append(success)
    return {key: sum(v) / len(v) for key, v in groups.items()}


def base_rates(seeds: list[int]) -> dict[str, dict[str, float]]:
    """The share of infeasible and refused tasks per column: what one outcome for all scores."""
    return {
        outcome: cells(
            [
                (family, LEVELS[s % 3], float(planned_outcome("test", family, s) == outcome))
                for family in FAMILIES
                for s in seeds
            ]
        )
        for outcome in ("infeasible", "refused")
    }


def table(result: dict[str, Any], rates: dict[str, dict[str, float]]) -> str:
    by_hack: dict[str, list[tuple[str, int, float]]] = defaultdict(list)
    for name, family, level, success in result["episodes"]:
        by_hack[name].append((family, level, success))
    lines = ["| hack | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    rows = [(name, cells(episodes)) for name, episodes in by_hack.items()]
    rows += [(f"base rate: {outcome}", rates[outcome]) for outcome in ("infeasible", "refused")]
    for name, row in rows:
        lines.append(
            "| " + " | ".join([name, *(f"{row[c]:.3f}" if c in row else "n/a" for c in COLUMNS)]) + " |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="Flights-v0 hack table on held-out seeds")
    parser.add_argument("--seeds", type=int, default=40, help="test seeds per family (from 90000)")
    parser.add_argument("--train-seeds", type=int, default=40, help="train seeds the memoriser learns")
    parser.add_argument("--granularities", nargs="*", default=list(GRANULARITIES))
    parser.add_argument("--observation", choices=["full", "compact"], default="full")
    args = parser.parse_args()
    seeds = list(range(TEST_BASE, TEST_BASE + args.seeds))
    rates = base_rates(seeds)
    started = time.perf_counter()
    for granularity in args.granularities:
        for stochastic in (False, True):
            result = measure_at(
                granularity,
                dict.fromkeys(FAMILIES, seeds),
                args.train_seeds,
                stochastic=stochastic,
                observation=args.observation,
            )
            world = "stochastic" if stochastic else "static"
            print(f"\n### {granularity} granularity, {world} world, {args.observation} observations\n")
            print(table(result, rates), flush=True)
    print(f"\n{args.seeds} test seeds per family; {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
