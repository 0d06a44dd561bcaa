"""Constraints decide: at every level, in the static and the moving world, the readings that skip
them (the exact route's cheapest or earliest flight, the first one listed) never name the answer."""

import pytest

from agentrl.flights.tasks import FAMILIES, LEVELS, make_task
from agentrl.flights.world import generate_world

SEEDS = range(90_000, 90_020)


def blind_picks(world, task):
    """The flights the shortcuts act on, read from the world's rows (after the task's fare rise)."""
    cabin, seats = task.request["cabin"], len(task.request["passengers"])
    prices = {f: world.fares[(f, cabin)]["price"] for f in world.city_flights(*task.route)}
    if task.fare_change:
        prices[task.fare_change[0]] = task.fare_change[2]
    own = world.bookings[task.request["pnr"]]["flight_id"] if task.request["pnr"] else None
    bookable = [
        f
        for f in world.route_flights(*task.route)
        if f != own and sum(world.free_counts[(f, cabin)].values()) >= seats
    ]
    departs = {f: world.flights[f]["departs"] for f in prices}
    listed = sorted(prices, key=lambda f: world.flights[f]["number"])
    return {
        "cheapest": min(bookable, key=lambda f: (prices[f], departs[f])),
        "earliest": min(bookable, key=lambda f: departs[f]),
        "first listed": listed[0],
    }


@pytest.mark.parametrize("fare_changes", [False, True], ids=["static", "moving"])
@pytest.mark.parametrize("level", LEVELS)
def test_the_shortcuts_never_name_the_answer(level, fare_changes):
    worlds = {}

    def get_world(*key):
        if key not in worlds:
            worlds[key] = generate_world(*key)
        return worlds[key]

    done = 0
    for family in FAMILIES:
        for seed in SEEDS:
            world, task = make_task("test", seed, 1, family, level, fare_changes, get_world=get_world)
            assert (task.request["depart_after"], task.request["depart_before"]) != ("00:00", "23:59")
            if task.outcome != "done":
                continue
            done += 1
            picks = blind_picks(world, task)
            assert task.target not in picks.values(), (family, seed, picks, task.target)
            if task.request["cabin"] == "economy":  # what the coarse macros pick with bare arguments
                assert picks["cheapest"] != task.target
    assert done >= 0.7 * len(FAMILIES) * len(SEEDS)
