"""World invariants after random action sequences (hypothesis), and the fast paths that read the
episode's change log instead of the database equal what the database says."""

import gymnasium as gym
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentrl  # noqa: F401
from agentrl.core import tool_call as call
from agentrl.core.state_hash import canonical, state_hash, text_digest
from agentrl.flights.changes import changed_rows
from agentrl.flights.invariants import violations
from agentrl.flights.world import CABINS, CAPACITY

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


# every fare's price and seats sold, read from the database: what a search showed when it ran SQL
FARES_SOLD = (
    "SELECT f.flight_id, f.cabin, f.price, (SELECT count(*) FROM occupied_seats o "
    "WHERE o.flight_id = f.flight_id AND o.cabin = f.cabin) FROM fares f"
)


def check_fast_paths(env):
    """The search's prices and seats left, and the state hash's changed rows, as kept from the change
    log, against the database itself."""
    assert env._changes.net_rows(env._raw) == changed_rows(env._raw)
    ids = sorted(env.world.flights)
    shown = {s["flight_id"]: s["fares"] for s in env._summaries(ids)}
    aircraft = {fid: f["aircraft"] for fid, f in env.world.flights.items()}
    for fid, cabin, price, sold in env._raw.execute(FARES_SOLD):
        assert shown[fid][cabin] == {"price": price, "seats_left": CAPACITY[(aircraft[fid], cabin)] - sold}
    assert all(set(fares) == set(CABINS) for fares in shown.values())


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 60), steps=st.lists(actions, min_size=1, max_size=20))
def test_invariants_hold_after_random_actions(seed, steps):
    ENV.reset(seed=seed)
    assert violations(ENV.session, ENV) == []
    check_fast_paths(ENV)
    for step in steps:
        ENV.step(_resolve(step))
        check_fast_paths(ENV)
        if ENV.episode_over:
            break
    assert violations(ENV.session, ENV) == []


def full_state_hash(env, shown_results):
    """`info["state_hash"]` recomputed from nothing kept: the task's digest, the set of every tool
    result shown so far, and the world state with its changed rows read from the whole change table."""
    world = {**env._world_state(), "rows": changed_rows(env._raw)}
    shown = sorted({text_digest(result) for result in shown_results})
    return state_hash(" ".join([text_digest(env._trace.observation), *shown, "|", canonical(world)]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 60), steps=st.lists(actions, min_size=1, max_size=12))
def test_the_kept_state_hash_equals_the_full_recomputation(seed, steps):
    """The hash each step reports, from digests and changed rows kept as the episode goes, is the one
    the whole episode recomputed gives, over random bookings, changes, cancellations and reads."""
    _observation, info = ENV.reset(seed=seed)
    shown: list[str] = []
    assert info["state_hash"] == full_state_hash(ENV, shown)
    for step in steps:
        _observation, _reward, _terminated, _truncated, info = ENV.step(_resolve(step))
        shown += [c["result"] for c in ENV._step_calls if c["ok"]]
        assert info["state_hash"] == full_state_hash(ENV, shown)
        if ENV.episode_over:
            break


def test_fast_paths_hold_in_forks_and_the_moving_world():
    """Fare rises and other customers' purchases (the moving world), then a fork that books on:
    the change log's figures follow the database in the parent and in the fork alike."""
    env = gym.make("agentrl/Flights-v0", stochastic=True, max_turns=60).unwrapped
    changed = 0
    for seed in range(6):
        env.reset(seed=seed, options={"family": "cheapest"})
        route = env.task.route
        env.step(call("search_flights", origin=route[0], destination=route[1], date=route[2]))
        for step in (("book", 3, "economy", [1], 2, {}), ("book", 7, "business", [2, 3], 4, {})):
            env.step(_booking_call(env, step))
            check_fast_paths(env)
        child = env.fork(1)[0]
        child.step(_booking_call(child, ("book", 11, "economy", [4], 8, {})))
        check_fast_paths(child)
        check_fast_paths(env)
        changed += bool(env._changes.net.prices) + bool(env._changes.net.sold)
        child.close()
    assert changed > 0, "no episode moved a fare or sold a seat: the check compared nothing"
    env.close()


def _booking_call(env, step):
    _kind, f, c, people, pm, seat = step
    passengers, methods = env.world.rows["passengers"], env.world.rows["payment_methods"]
    return call(
        "book_flight",
        flight_id=sorted(env.world.flights)[f],
        cabin=c,
        passenger_ids=[passengers[i]["id"] for i in people],
        payment_method_id=methods[pm]["id"],
    )
