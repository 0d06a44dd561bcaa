"""The moving world does not point at the answer: fare rises and seat churn land on the answer no
more often than on any other flight the search lists, and the notice a failed write provokes names
no flight."""

import math

from flights_hack_policies import NOBODYS_CARD

from agentrl.core import tool_call as call
from agentrl.flights.generation import generate_world
from agentrl.flights.oracle import last_response
from agentrl.flights.tasks import FAMILIES, LEVELS, make_task

SEEDS = range(90_000, 90_060)


def bound(shares):
    """The most hits a fair draw gives, with these per-task chances, at three standard deviations."""
    return sum(shares) + 3 * math.sqrt(sum(p * (1 - p) for p in shares))


def test_the_risen_fare_is_the_answer_at_most_at_its_share_of_the_listed_flights():
    worlds = {}

    def get_world(*key):
        if key not in worlds:
            worlds[key] = generate_world(*key)
        return worlds[key]

    hits, shares, on_answer_route = 0, [], 0
    for family in FAMILIES:
        for seed in SEEDS:
            world, task = make_task("test", seed, 1, family, LEVELS[seed % 3], True, get_world=get_world)
            listed = world.city_flights(*task.route)
            assert task.fare_change is not None and task.fare_change[0] in listed
            on_answer_route += task.fare_change[0] in world.route_flights(*task.route)
            if task.outcome == "done":
                hits += task.fare_change[0] == task.target
                shares.append(1 / len(listed))
    assert len(shares) > 250
    assert hits <= bound(shares), (hits, sum(shares))
    assert on_answer_route > 0  # the rise lands on the exact route too, not only on its lures


def test_churn_sells_seats_on_the_answer_at_most_at_its_share(make_flights):
    env = make_flights(churn=True, split="test", privileged_info=True)
    hits, shares = 0, []
    for seed in SEEDS[:20]:
        env.reset(seed=seed, options={"family": FAMILIES[seed % 6], "level": LEVELS[seed % 3]})
        if env.task.outcome != "done":
            continue
        for _ in range(30):
            env._churn()
        sold = env._raw.execute("SELECT flight_id FROM occupied_seats WHERE source = 'churn'").fetchall()
        eligible = env.world.city_flights(*env.task.route)
        hits += sum(flight == env.task.target for (flight,) in sold)
        shares += [1 / len(eligible)] * len(sold)
    assert len(shares) > 200
    assert hits <= bound(shares), (hits, sum(shares))


def test_the_notice_is_the_same_whatever_flight_the_write_names(make_flights):
    """A write bound to fail (nobody's card) meets the fare notice, on the answer or any other flight,
    and it names no flight."""
    notices = set()
    for aimed_at_answer in (True, False):
        env = make_flights(fare_changes=True, split="test", privileged_info=True)
        for seed in SEEDS[:12]:
            env.reset(seed=seed, options={"family": "cheapest"})
            if env.task.outcome != "done":
                continue
            others = [f for f in env.world.city_flights(*env.task.route) if f != env.task.target]
            flight = env.task.target if aimed_at_answer else others[0]
            r = env.task.request
            observation = env.step(
                call(
                    "book_flight",
                    flight_id=flight,
                    cabin=r["cabin"],
                    passenger_ids=r["passengers"],
                    payment_method_id=NOBODYS_CARD,
                )
            )[0]
            _name, _content, error = last_response(observation)
            notices.add(error)
    assert len(notices) == 1 and "fares on this route changed" in notices.pop()
