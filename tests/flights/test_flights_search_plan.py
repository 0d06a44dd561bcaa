"""A search's prices and seats sold: one prepared statement that counts seats on their index.

The seats-sold count was a third of a search step's time while it scanned every sold seat of a flight
once per cabin; these tests fail if the statement stops using the (flight, cabin) index or if its
answer drifts from the seats actually sold.
"""

import json
from collections import Counter

from agentrl.flights.calls import call
from agentrl.flights.queries import _FARES_SOLD
from agentrl.flights.world import CAPACITY


def _searched(env):
    _, info = env.reset(seed=3)
    origin, destination, date = env.task.route
    env.step(call("search_flights", origin=origin, destination=destination, date=date))
    assert env._last_search, "the task's own route has flights"
    return env, info


def test_seats_sold_are_counted_on_the_flight_cabin_index(make_flights):
    env, _ = _searched(make_flights())
    plan = " | ".join(row[-1] for row in env._raw.execute(
        "EXPLAIN QUERY PLAN " + _FARES_SOLD, (json.dumps(env._last_search),)))
    assert "COVERING INDEX ix_occupied_seats_flight_cabin" in plan, plan


def test_seats_left_are_capacity_minus_the_seats_sold(make_flights):
    env, _ = _searched(make_flights(stochastic=True))
    ids = env._last_search
    sold = Counter(env._raw.execute(
        f"SELECT flight_id, cabin FROM occupied_seats WHERE flight_id IN ({','.join('?' * len(ids))})", ids))
    summaries = env._summaries(ids)
    assert [s["flight_id"] for s in summaries] == ids
    for s in summaries:
        for cabin, fare in s["fares"].items():
            assert fare["seats_left"] == CAPACITY[(s["aircraft"], cabin)] - sold[(s["flight_id"], cabin)]
    assert sum(sold.values()) > 0, "the flights searched have seats sold, so the count is tested"
