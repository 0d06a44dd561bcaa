"""World invariants after random action sequences (hypothesis)."""

import gymnasium as gym
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentrl  # noqa: F401
from agentrl.flights.invariants import violations
from agentrl.flights.oracle import call

ENV = gym.make("agentrl/Flights-v0", stochastic=True, max_turns=60).unwrapped

flight = st.integers(1, 110)
cabin = st.sampled_from(["economy", "business"])
passenger = st.integers(1001, 1024).map(lambda i: f"P{i}")
actions = st.one_of(
    st.builds(
        lambda f, c, p, pm, pref: call(
            "book_flight",
            flight_id=f,
            cabin=c,
            passenger_ids=p,
            payment_method_id=pm,
            **({"seat_preference": pref} if pref else {}),
        ),
        flight,
        cabin,
        st.lists(passenger, min_size=1, max_size=3),
        st.integers(1, 24).map(lambda i: f"pm_wallet_{i:02d}"),
        st.sampled_from([None, "window", "aisle", "middle"]),
    ),
    st.builds(lambda k: ("cancel", k), st.integers(0, 30)),
    st.builds(lambda k, f: ("change", k, f), st.integers(0, 30), flight),
    st.builds(lambda f, c: call("check_seats", flight_id=f, cabin=c), flight, cabin),
    st.builds(
        lambda f, c, s: call(
            "book_flight",
            flight_id=f,
            cabin=c,
            passenger_ids=["P1002"],
            payment_method_id="pm_wallet_02",
            seat=s,
        ),
        flight,
        cabin,
        st.sampled_from(["1A", "3C", "5B", "12F", "30A"]),
    ),
)


def _pnrs():
    from sqlalchemy import select

    from agentrl.flights import models as m

    return sorted(ENV.session.scalars(select(m.Booking.pnr)))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), steps=st.lists(actions, min_size=1, max_size=20))
def test_invariants_hold_after_random_actions(seed, steps):
    ENV.reset(seed=seed)
    assert violations(ENV.session, ENV) == []
    for step in steps:
        if isinstance(step, tuple):
            pnrs = _pnrs()
            pnr = pnrs[step[1] % len(pnrs)]
            step = (
                call("cancel_booking", pnr=pnr)
                if step[0] == "cancel"
                else call("change_booking", pnr=pnr, new_flight_id=step[2])
            )
        ENV.step(step)
        if ENV.episode_over:
            break
    assert violations(ENV.session, ENV) == []
