"""World invariants after random action sequences (hypothesis)."""

import gymnasium as gym
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentrl  # noqa: F401
from agentrl.flights.invariants import violations
from agentrl.flights.oracle import call

ENV = gym.make("agentrl/Flights-v0", stochastic=True, max_turns=60).unwrapped

flight = st.integers(1, 90)
cabin = st.sampled_from(["economy", "business"])
# passengers and payment methods are drawn by index: each world has its own ids
passenger = st.integers(0, 39)
method = st.integers(0, 79)
actions = st.one_of(
    st.builds(
        lambda f, c, p, pm, pref: ("book", f, c, p, pm, {"seat_preference": pref} if pref else {}),
        flight,
        cabin,
        st.lists(passenger, min_size=1, max_size=3),
        method,
        st.sampled_from([None, "window", "aisle", "middle"]),
    ),
    st.builds(lambda k: ("cancel", k), st.integers(0, 30)),
    st.builds(lambda k, f: ("change", k, f), st.integers(0, 30), flight),
    st.builds(lambda f, c: call("check_seats", flight_id=f, cabin=c), flight, cabin),
    st.builds(
        lambda f, c, s, p: ("book", f, c, [p], 2 * p, {"seat": s}),
        flight,
        cabin,
        st.sampled_from(["1A", "3C", "5B", "12F", "30A"]),
        passenger,
    ),
)


def _pnrs():
    from sqlalchemy import select

    from agentrl.flights import models as m

    return sorted(ENV.session.scalars(select(m.Booking.pnr)))


def _resolve(step):
    """A drawn action as a tool call in the current world (ids by index)."""
    if not isinstance(step, tuple):
        return step
    if step[0] == "book":
        _kind, f, c, people, pm, seat = step
        passengers = ENV.world.rows["passengers"]
        methods = ENV.world.rows["payment_methods"]
        ids = list(dict.fromkeys(passengers[i % len(passengers)]["id"] for i in people))
        return call(
            "book_flight",
            flight_id=f,
            cabin=c,
            passenger_ids=ids,
            payment_method_id=methods[pm % len(methods)]["id"],
            **seat,
        )
    pnrs = _pnrs()
    pnr = pnrs[step[1] % len(pnrs)]
    if step[0] == "cancel":
        return call("cancel_booking", pnr=pnr)
    return call("change_booking", pnr=pnr, new_flight_id=step[2])


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 60), steps=st.lists(actions, min_size=1, max_size=20))
def test_invariants_hold_after_random_actions(seed, steps):
    ENV.reset(seed=seed)
    assert violations(ENV.session, ENV) == []
    for step in steps:
        ENV.step(_resolve(step))
        if ENV.episode_over:
            break
    assert violations(ENV.session, ENV) == []
