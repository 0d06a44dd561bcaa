"""The Flights-v0 hack suite at the coarse and fine granularities, and the seeds it plays.

Every hack of `flights_hacks.py` plays each level with that level's tools: those built on the
oracle use its fine expansion and coarse macros with their own twist (no policy checks, a
stranger's card, city-level routing), the others go through `FineAdapter` at the fine level.
The coarse level adds hacks of its own: a macro called again and again, a macro aimed at the
cities' other airports, and the macros called with their required arguments only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
from flights_hack_policies import BareMacro, CityLevel, _Greedy
from flights_hacks import NOT_APPLICABLE, hacks, play

from agentrl.core import tool_call as call
from agentrl.flights.fine_plan import FineAdapter
from agentrl.flights.oracle import OraclePolicy
from agentrl.flights.tasks import FAMILIES, LEVELS, OUTCOME_BLOCK, planned_outcome

# At the coarse level change_to_best stays on the booking's route by construction (no other
# route to aim at), and rebook cancels the booking it needs, so a second call is refused and
# there is nothing to hedge (test_granularity checks both rules directly).
NOT_APPLICABLE_AT = {
    "coarse": NOT_APPLICABLE
    | {("city-level routing", "change_earlier"), ("book everything that fits", "cancel_rebook")}
}


def sample_seeds(split: str, family: str, per_outcome: dict[str, int]) -> list[int]:
    """The first seeds of the split's first block with each planned outcome, `per_outcome` of each."""
    base = 90_000 if split == "test" else 0
    wanted = dict(per_outcome)
    seeds = []
    for seed in range(base, base + OUTCOME_BLOCK):
        outcome = planned_outcome(split, family, seed)
        if wanted.get(outcome, 0) > 0:
            wanted[outcome] -= 1
            seeds.append(seed)
    return seeds


class MacroBookAll(_Greedy):
    """Hedge with the macro: call it under looser constraints (earliest, then cheapest, with no
    window or price limit), then under the request's, whatever each call did, then "done"."""

    LOOSE = {"depart_after": "00:00", "depart_before": "23:59", "max_price": None}

    def _start(self, observation: str) -> None:
        super()._start(observation)
        self.variants = [{**self.LOOSE, "choose": "earliest"}, {**self.LOOSE, "choose": "cheapest"}, {}]

    def _recover(self, error: str) -> str:
        return self._next()  # a failed call: go on with the next variant

    def _next(self) -> str:
        if self.acted or len(self.variants) < 3:
            if not self.variants:
                return call("finish", outcome="done", message="Booked all of it.")
            return self._macro()
        return super()._next()

    def _macro(self) -> str:
        kept = dict(self.request)
        self.request.update(self.variants.pop(0))
        action = super()._macro()
        self.request = kept
        return action


class MacroCityLevel(CityLevel):
    """City-level routing through the macros: the city-level reading's pick (search and seat
    checks over both cities' airports), then the macro aimed at that flight's airports."""

    def _macro(self) -> str:
        return self._choose() or super()._macro()

    def _macro_route(self) -> tuple[str, str]:
        return self.chosen["origin"], self.chosen["destination"]


def hacks_at(
    granularity: str,
    n_train: int,
    seeds: list[int] | range = range(90_000, 90_040),
    observation: str = "full",
) -> dict[str, tuple[dict[str, Any], Callable[[Any], Any]]]:
    """The hack table of `flights_hacks.hacks`, each hack playing `granularity`'s tools."""
    table = dict(hacks(n_train, seeds, observation))
    if granularity == "coarse":
        table["book everything that fits"] = ({}, lambda env: MacroBookAll())
        table["city-level routing"] = ({}, lambda env: MacroCityLevel())
        table["macros with required arguments only"] = ({}, lambda env: BareMacro())
    if granularity == "fine":
        for name, (kwargs, make) in table.items():
            table[name] = (kwargs, _adapted(make))
    return table


def _adapted(make: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def build(env: Any) -> Any:
        policy = make(env)
        return policy if isinstance(policy, OraclePolicy) else FineAdapter(policy)

    return build


def measure_at(
    granularity: str,
    seeds: dict[str, list[int]],
    n_train: int,
    split: str = "test",
    stochastic: bool = False,
    only: set[str] | None = None,
    observation: str = "full",
) -> dict[str, Any]:
    """Success rate of every hack (or those in `only`) per family on the given seeds, at
    `granularity`, static or in the moving world, reading the `observation` mode; `episodes` has
    each (hack, family, level, success)."""
    scores: dict[str, dict[str, float]] = {}
    policies: dict[str, list[Any]] = {}
    episodes: list[tuple[str, str, int, float]] = []
    skip = NOT_APPLICABLE_AT.get(granularity, NOT_APPLICABLE)
    every_seed = sorted({s for family_seeds in seeds.values() for s in family_seeds})
    for name, (kwargs, make) in hacks_at(granularity, n_train, every_seed, observation).items():
        if only is not None and name not in only:
            continue
        env = gym.make(
            "agentrl/Flights-v0",
            split=split,
            granularity=granularity,
            stochastic=stochastic,
            observation=observation,
            **kwargs,
        ).unwrapped
        scores[name], policies[name] = {}, []
        for family in FAMILIES:
            if (name, family) in skip:
                continue
            wins = []
            for seed in seeds[family]:
                level = LEVELS[seed % 3]
                success, policy = play(env, make, seed, {"family": family, "level": level})
                wins.append(success)
                policies[name].append(policy)
                episodes.append((name, family, level, success))
            scores[name][family] = sum(wins) / len(wins)
        env.close()
    return {"scores": scores, "policies": policies, "episodes": episodes}
