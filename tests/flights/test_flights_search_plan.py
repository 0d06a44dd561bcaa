"""A search's seats left: the world's template figures plus the seats the episode's change log says
were sold since, equal to capacity minus the seats the database holds as sold (the search runs no
SQL; tests/flights/test_flights_invariants.py checks prices and seats after random actions too).
"""

from collections import Counter

from agentrl.core import tool_call as call
from agentrl.flights.world import CAPACITY


def _searched(env):
    _, info = env.reset(seed=3)
    origin, destination, date = env.task.route
    env.step(call("search_flights", origin=origin, destination=destination, date=date))
    assert env._last_search, "the task's own route has flights"
    return env, info


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
