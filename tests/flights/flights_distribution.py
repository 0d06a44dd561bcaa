"""Measures of the Flights-v0 task distribution: repeated texts, train/test overlap, text twins.

python tests/flights/flights_distribution.py --seeds 200     # the figures in docs/envs/flights.md
"""

from __future__ import annotations

import argparse
import re
from collections import Counter, defaultdict
from typing import Any

from agentrl.flights.generation import generate_world
from agentrl.flights.geography import AIRPORT_NAME
from agentrl.flights.tasks import FAMILIES, LEVELS, make_task


def draw(split: str, n_seeds: int) -> dict[Any, list[Any]]:
    """Every family and level's task for seeds 0..n-1 of a split (no databases), and world summaries."""
    found: dict[Any, list[Any]] = defaultdict(list)
    worlds: dict[tuple[str, int, int, int], Any] = {}

    def get_world(split: str, index: int, days: int, variant: int) -> Any:
        key = (split, index, days, variant)
        if key not in worlds:
            worlds[key] = generate_world(*key)
        return worlds[key]

    for seed in range(n_seeds):
        for family in FAMILIES:
            for level in LEVELS:
                _world, task = make_task(split, seed, 1, family, level, False, get_world=get_world)
                found[(family, level)].append(task)
        for key in [k for k in worlds if k[1] == seed]:
            world = worlds.pop(key)  # keep what the overlap check compares, not the whole world
            found["worlds"].append(
                (
                    world.key,
                    {(f["origin"], f["destination"]) for f in world.flights.values()},
                    {p["id"] for p in world.rows["passengers"]},
                    {p["name"] for p in world.rows["passengers"]},
                )
            )
    return found


def repetition(found: dict[Any, list[Any]]) -> dict[tuple[str, int], float]:
    """Share of texts that repeat an earlier one, per family and level."""
    out = {}
    for family in FAMILIES:
        for level in LEVELS:
            texts = [t.text for t in found[(family, level)]]
            out[(family, level)] = 1 - len(set(texts)) / len(texts)
    return out


def overlap(train: dict[Any, list[Any]], test: dict[Any, list[Any]]) -> dict[str, int]:
    """How many texts, exact routes, passenger ids, passenger names and worlds both splits have."""

    def collect(found: dict[Any, list[Any]]) -> list[set[Any]]:
        texts = {t.text for key, tasks in found.items() if key != "worlds" for t in tasks}
        worlds = found["worlds"]
        return [texts, *(set().union(*(w[i] for w in worlds)) for i in (1, 2, 3)), {w[0] for w in worlds}]

    names = ("texts", "routes", "passenger ids", "passenger names", "worlds")
    return {n: len(a & b) for n, a, b in zip(names, collect(train), collect(test), strict=True)}


def mask(text: str) -> str:
    """The template of a text: names, codes, numbers and times blanked, lists of people folded."""
    for name in sorted(AIRPORT_NAME.values(), key=len, reverse=True):
        text = text.replace(name, "<airport>")
    text = re.sub(r"[A-Z][\w'-]* [A-Z][\w'-]* \(passenger P\d+\)", "<person>", text)
    text = re.sub(r"<person>(, <person>)* and <person>", "<people>", text)
    text = re.sub(r"\b(pm_card_\d+|[A-Z0-9]{6}|[A-Z]{3})\b", "<code>", text)
    text = re.sub(r"\d{4}-\d{2}-\d{2}|\d{2}:\d{2}|\d+", "<n>", text)
    return re.sub(r"\b(window|aisle)\b", "<position>", text)


def lonely_templates(found: dict[Any, list[Any]]) -> dict[tuple[str, int], Counter[str]]:
    """Templates used by infeasible or refused requests but by no done request of their family and level."""
    lonely = {}
    for key, tasks in found.items():
        if key == "worlds":
            continue
        done = {mask(t.text) for t in tasks if t.outcome == "done"}
        odd = Counter(mask(t.text) for t in tasks if t.outcome != "done" and mask(t.text) not in done)
        if odd:
            lonely[key] = odd
    return lonely


def outcome_mix(found: dict[Any, list[Any]]) -> Counter[str]:
    return Counter(t.outcome for key, tasks in found.items() if key != "worlds" for t in tasks)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Flights-v0 task distribution figures")
    parser.add_argument("--seeds", type=int, default=1000)
    args = parser.parse_args()
    drawn = {split: draw(split, args.seeds) for split in ("train", "test")}
    for split, found in drawn.items():
        rep = repetition(found)
        print(f"{split}: most repeated family/level {max(rep, key=rep.get)} at {max(rep.values()):.4f}")
        print(f"{split}: outcome mix {dict(outcome_mix(found))}")
        print(f"{split}: templates only non-done requests use: {len(lonely_templates(found))}")
    print("train/test overlap:", overlap(drawn["train"], drawn["test"]))
