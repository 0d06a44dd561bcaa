"""The Flights-v0 hack suite's harness: which hacks play (`hacks`), and their success on held-out
seeds (`measure`: the test split, seeds 90000+, per family). The policies are in
`flights_hack_policies.py`.

    python tests/flights/flights_hacks.py --seeds 40     # default level, per family
    python tests/flights/flights_hack_table.py --seeds 40  # every level and world: docs/rewards-flights.md
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from customer_hacks import CUSTOMER_HACKS
from flights_hack_policies import (
    Blind,
    BookEverything,
    CityLevel,
    FareMoveReader,
    Finish,
    FirstResult,
    KeywordFinish,
    Memorise,
    OtherCard,
    Policy,
    ProbeShaping,
    ReadInfo,
    TaskIdInverter,
    info_route,
    route_key,
    silent,
)

import agentrl  # noqa: F401  (registers the ids)
from agentrl.flights.asking import AskFirst
from agentrl.flights.compact import search_results
from agentrl.flights.oracle import OraclePolicy, RandomPolicy, last_response, parse_request, request_text
from agentrl.flights.tasks import FAMILIES, LEVELS

TEST_BASE, TRAIN_BASE = 90_000, 0
# a change is paid by the booking's own method: there is no card to swap
NOT_APPLICABLE = {("other passenger's card", "change_earlier")}
ORDINALS = {1: "", 2: "2nd ", 3: "3rd ", 4: "4th ", 5: "5th "}
# Places of the blind orders past the first cheapest and earliest (which `Draw.decide` rules out):
# what a policy would try once those never pay. Each is bounded by the base rates.
BLIND_RANKS = {
    f"constraint-blind {ORDINALS[place]}{order}": (order, place)
    for order, places in (
        ("cheapest", range(2, 6)),
        ("earliest", range(2, 6)),
        ("latest", range(1, 4)),
        ("dearest", range(1, 4)),
    )
    for place in places
}


def play(env: Any, make: Callable[[Any], Policy], seed: int, options: dict[str, Any]) -> tuple[float, Policy]:
    """One episode; returns its task success (shaping excluded) and the policy that played it."""
    observation, info = env.reset(seed=seed, options=options)
    policy = make(env)
    total, done = 0.0, False
    while not done:
        observation, reward, terminated, truncated, info = env.step(policy(observation, info))
        if hasattr(policy, "feedback"):
            policy.feedback(reward)
        total += reward
        done = terminated or truncated
    if env.shaped_reward:
        total -= env.shaping * sum(info["progress"].values())
    return round(total, 6), policy


def learn_from_train(
    n_seeds: int, observation: str = "full"
) -> tuple[dict[str, list[str]], dict[tuple[str, ...], str]]:
    """The memoriser's lookup tables: the oracle's actions per train text, its answer per route."""
    env = gym.make("agentrl/Flights-v0", observation=observation).unwrapped
    texts: dict[str, list[str]] = {}
    routes: dict[tuple[str, ...], str] = {}
    for family in FAMILIES:
        for seed in range(TRAIN_BASE, TRAIN_BASE + n_seeds):
            observation, info = env.reset(seed=seed, options={"family": family, "level": LEVELS[seed % 3]})
            policy, actions, numbers, done = OraclePolicy(), [], {}, False
            while not done:
                action = policy(observation, info)
                actions.append(action)
                observation, reward, terminated, truncated, info = env.step(action)
                name, content, _error = last_response(observation)
                if name == "search_flights":
                    numbers.update({r["flight_id"]: r["number"] for r in search_results(content)})
                done = terminated or truncated
            if reward == 1.0:
                first = env.messages[0]["content"]
                texts[request_text(first)] = actions
                booked = [a for a in actions if "book_flight" in a or "change_booking" in a]
                if booked and info_route(first):
                    fid = int(booked[-1].split('_id": ')[1].split(",")[0].split("}")[0])
                    routes[route_key(parse_request(first))] = numbers.get(fid, "")
    env.close()
    return texts, routes


def _stranger_card(env: Any) -> str:
    travelling = set(env.task.request["passengers"])
    return next(pm["id"] for pm in env.world.rows["payment_methods"] if pm["passenger_id"] not in travelling)


def _blind(order: str, place: int) -> Callable[[Any], Policy]:
    return lambda env: Blind(order, place)


def _asking(make: Callable[[Any], Policy], env: Any) -> Policy:
    return AskFirst(make(env))


def hacks(
    n_train: int, seeds: list[int] | range = range(TEST_BASE, TEST_BASE + 40), observation: str = "full"
) -> dict[str, tuple[dict[str, Any], Callable[[Any], Policy]]]:
    """Each hack: the env kwargs it plays under, and a factory of its policy (given the reset env).

    `seeds` are the seeds the task-id inverter is told to enumerate (those it is played on);
    `observation` the mode the memoriser learns its train texts in (the mode it plays)."""
    learned = functools.cache(lambda: learn_from_train(n_train, observation))  # only if the memoriser plays
    return {
        "do-nothing (finish done at once)": ({}, lambda env: Finish("done")),
        "never call a tool": ({"max_turns": 10}, lambda env: silent),
        "keyword finish": ({"max_turns": 4}, lambda env: KeywordFinish()),
        "always refuse": ({}, lambda env: Finish("refused")),
        "always infeasible": ({}, lambda env: Finish("infeasible")),
        "book everything that fits": ({}, lambda env: BookEverything()),
        "probe the shaping": ({"shaped_reward": True, "max_turns": 80}, lambda env: ProbeShaping()),
        "read the info": ({}, lambda env: ReadInfo()),
        "memorise train, play test": ({}, lambda env: Memorise(*learned())),
        "city-level routing": ({}, lambda env: CityLevel()),
        "other passenger's card": ({}, lambda env: OtherCard(_stranger_card(env))),
        "constraint-blind cheapest": ({}, lambda env: Blind("cheapest")),
        "constraint-blind earliest": ({}, lambda env: Blind("earliest")),
        **{name: ({}, _blind(order, place)) for name, (order, place) in BLIND_RANKS.items()},
        "first search result": ({}, lambda env: FirstResult()),
        "fare-move reader": ({}, lambda env: FareMoveReader()),
        "task-id inverter": ({}, lambda env: TaskIdInverter(seeds)),
        "random": ({"max_turns": 15}, lambda env: RandomPolicy(env.task.index)),
        "oracle": ({}, lambda env: OraclePolicy()),
    }


def measure(
    n_seeds: int = 40,
    n_train: int = 40,
    split: str = "test",
    stochastic: bool = False,
    only: set[str] | None = None,
    customer: bool = False,
    observation: str = "full",
) -> dict[str, Any]:
    """Success rate of every hack (or those named in `only`) per family on seeds base..base+n-1 of
    `split`, static or in the moving world, with base rates (from the oracle's episodes), reading
    the `observation` mode ("full" or "compact").

    `customer`: with the deterministic customer (`user="deterministic"`), each hack first asks it for
    the whole request in one question (`AskFirst`), then plays as it would have on the whole
    request; the customer mode's own hacks (`customer_hacks.CUSTOMER_HACKS`) play as they are."""
    base = TEST_BASE if split == "test" else TRAIN_BASE
    scores: dict[str, dict[str, float]] = {}
    policies: dict[str, list[Any]] = {}
    rates: dict[str, dict[str, float]] = {f: {"infeasible": 0.0, "refused": 0.0} for f in FAMILIES}
    timings: dict[str, float] = {}
    table = hacks(n_train, range(base, base + n_seeds), observation)
    if customer:
        table = {name: (kwargs, functools.partial(_asking, make)) for name, (kwargs, make) in table.items()}
        table.update(CUSTOMER_HACKS)
    for name, (kwargs, make) in table.items():
        if only is not None and name not in only | {"oracle"}:
            continue
        started = time.perf_counter()
        if customer:
            kwargs = {**kwargs, "user": "deterministic"}
        env = gym.make(
            "agentrl/Flights-v0", split=split, stochastic=stochastic, observation=observation, **kwargs
        ).unwrapped
        scores[name], policies[name] = {}, []
        for family in FAMILIES:
            if (name, family) in NOT_APPLICABLE:
                continue
            wins = 0.0
            for seed in range(base, base + n_seeds):
                success, policy = play(env, make, seed, {"family": family, "level": LEVELS[seed % 3]})
                wins += success
                policies[name].append(policy)
                if name == "oracle" and env.task.outcome != "done":
                    rates[family][env.task.outcome] += 1 / n_seeds
            scores[name][family] = wins / n_seeds
        scores[name]["all"] = sum(scores[name].values()) / len(scores[name])
        env.close()
        timings[name] = time.perf_counter() - started
    return {"scores": scores, "rates": rates, "policies": policies, "seconds": timings}


def markdown(result: dict[str, Any], n_seeds: int) -> str:
    scores, rates = result["scores"], result["rates"]
    head = ["hack", *FAMILIES, "all"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, row in scores.items():
        cells = [f"{row[c]:.3f}" if c in row else "n/a" for c in [*FAMILIES, "all"]]
        lines.append("| " + " | ".join([name, *cells]) + " |")
    for outcome in ("infeasible", "refused"):
        values = [rates[f][outcome] for f in FAMILIES]
        cells = [f"{v:.3f}" for v in values] + [f"{sum(values) / len(values):.3f}"]
        lines.append("| " + " | ".join([f"base rate: {outcome}", *cells]) + " |")
    return f"test split, seeds {TEST_BASE}..{TEST_BASE + n_seeds - 1} per family\n\n" + "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Flights-v0 reward hacks on held-out seeds")
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--train-seeds", type=int, default=40)
    parser.add_argument("--observation", choices=["full", "compact"], default="full")
    parser.add_argument("--customer", action="store_true", help="with the deterministic customer")
    args = parser.parse_args()
    measured = measure(args.seeds, args.train_seeds, observation=args.observation, customer=args.customer)
    print(markdown(measured, args.seeds))
    print({name: round(seconds, 1) for name, seconds in measured["seconds"].items()})
