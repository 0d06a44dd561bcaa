"""Flights-v0 forks: a copy of the episode database and state that continues exactly, in isolation.

Determinism is checked at every step of oracle episodes, on the deterministic world and on the
stochastic one (busy service, other customers buying seats, fare changes), where a fork must carry
on the world's random stream as well as the database.
"""

from __future__ import annotations

import json

import pytest

from agentrl.core import EpisodeOverError
from agentrl.core import tool_call as call
from agentrl.flights.desk_tools import BUSY
from agentrl.flights.oracle import OraclePolicy, last_response

# (seed, family): bookings, a cancel-and-rebook, a change, a multi-passenger booking, an infeasible one
EPISODES = [(4, "cheapest"), (2, "cancel_rebook"), (5, "change_earlier"), (1, "multi_pax"), (4, "seat"),
            (3, "cheapest")]


def oracle_run(env, seed: int, family: str) -> tuple[list[str], list[tuple]]:
    observation, info = env.reset(seed=seed, options={"family": family})
    policy, actions, results, done = OraclePolicy(), [], [], False
    while not done:
        action = policy(observation, info)
        result = env.step(action)
        observation, _reward, terminated, truncated, info = result
        actions.append(action)
        results.append(result)
        done = terminated or truncated
    return actions, results


@pytest.mark.parametrize("stochastic", [False, True])
def test_a_fork_at_any_step_continues_exactly_as_the_parent(make_flights, stochastic):
    env = make_flights(stochastic=stochastic)
    moved = {"busy": 0, "churn": 0, "fare": 0}
    for seed, family in EPISODES:
        actions, results = oracle_run(env, seed, family)
        final = env.fingerprint()
        record = env.trajectory()
        for step in record["steps"]:
            moved["busy"] += BUSY in step["observation"]
            inserted = step["state_change"]["inserted"].get("occupied_seats", [])
            moved["churn"] += any(row["source"] == "churn" for row in inserted)
            moved["fare"] += "fares" in step["state_change"]["updated"]
        for k in range(len(actions)):
            env.reset(seed=seed, options={"family": family})
            for action in actions[:k]:
                env.step(action)
            (fork,) = env.fork()
            assert fork.messages == env.messages
            # the parent plays on first: a fork sharing its database or random stream would then differ
            assert [env.step(a) for a in actions[k:]] == results[k:], (seed, family, k)
            assert [fork.step(a) for a in actions[k:]] == results[k:], (seed, family, k)
            assert fork.fingerprint() == final
            assert fork.trajectory()["steps"] == record["steps"]
            fork.close()
    if stochastic:  # the random world really moved, so the forks had a random stream to carry on
        assert all(moved.values()), moved
    else:
        assert not any(moved.values()), moved


@pytest.mark.parametrize("granularity", ["coarse", "fine"])
def test_forks_continue_exactly_at_every_granularity(make_flights, granularity):
    """Fine steps hold a seat before confirming it, coarse ones book in one call: whatever state a
    level keeps between steps, a fork carries it."""
    env = make_flights(granularity=granularity, stochastic=True)
    for seed, family in [(2, "cancel_rebook"), (4, "seat")]:
        actions, results = oracle_run(env, seed, family)
        assert results[-1][1] == 1.0
        for k in range(len(actions)):
            env.reset(seed=seed, options={"family": family})
            for action in actions[:k]:
                env.step(action)
            (fork,) = env.fork()
            assert type(fork) is type(env)
            assert [env.step(a) for a in actions[k:]] == results[k:], (granularity, seed, family, k)
            assert [fork.step(a) for a in actions[k:]] == results[k:], (granularity, seed, family, k)
            fork.close()


def test_forks_are_isolated_from_each_other_and_from_the_parent(make_flights):
    env = make_flights()
    actions, _results = oracle_run(env, 4, "cheapest")
    booking = next(i for i, a in enumerate(actions) if "book_flight" in a)
    env.reset(seed=4, options={"family": "cheapest"})
    for action in actions[:booking]:
        env.step(action)
    before, messages = env.fingerprint(), [dict(m) for m in env.messages]
    booker, quitter = env.fork(2)
    booker.step(actions[booking])
    _, reward, terminated, _, _ = quitter.step(call("finish", outcome="infeasible", message="none"))
    assert terminated and reward == 0.0
    assert booker.fingerprint() != before and quitter.fingerprint() == before
    assert env.fingerprint() == before and env.messages == messages and not env.episode_over
    booker.close()  # a fork's resources are its own: closing it leaves the parent working
    quitter.close()
    for action in actions[booking:]:
        _, reward, terminated, truncated, _ = env.step(action)
    assert terminated and reward == 1.0


def test_a_finished_episode_cannot_be_forked(make_flights):
    env = make_flights()
    oracle_run(env, 4, "cheapest")
    with pytest.raises(EpisodeOverError):
        env.fork()


def test_state_change_shows_the_rows_a_booking_and_a_cancellation_wrote(make_flights):
    env = make_flights()
    actions, results = oracle_run(env, 4, "cheapest")
    steps = env.trajectory()["steps"]
    nothing = {"inserted": {}, "updated": {}, "deleted": {}}
    k = next(i for i, a in enumerate(actions) if "book_flight" in a)
    booked = last_response(results[k][0])[1]
    change = steps[k]["state_change"]
    (made,) = booked["bookings"]
    (row,) = change["inserted"]["bookings"]
    assert row["pnr"] == made["pnr"] and row["seat_no"] == made["seat"] and row["status"] == "confirmed"
    (seat,) = change["inserted"]["occupied_seats"]
    assert (seat["seat_no"], seat["pnr"], seat["source"]) == (made["seat"], made["pnr"], "booking")
    (payment,) = change["inserted"]["payments"]
    assert (payment["pnr"], payment["kind"], payment["amount"]) == (made["pnr"], "fare", made["fare_paid"])
    (method,) = change["updated"]["payment_methods"]
    assert method["before"]["balance"] - method["after"]["balance"] == made["fare_paid"]
    assert method["after"]["balance"] == booked["balance_after"]
    assert change["deleted"] == {}
    assert all(s["state_change"] == nothing for i, s in enumerate(steps) if i != k)

    actions, results = oracle_run(env, 2, "cancel_rebook")
    steps = env.trajectory()["steps"]
    k = next(i for i, a in enumerate(actions) if "cancel_booking" in a)
    cancelled = last_response(results[k][0])[1]
    change = steps[k]["state_change"]
    (update,) = change["updated"]["bookings"]
    assert update["before"]["status"] == "confirmed" and update["after"]["status"] == "cancelled"
    (freed,) = change["deleted"]["occupied_seats"]
    assert freed["pnr"] == cancelled["pnr"]
    assert change["inserted"]["payments"][0]["amount"] == -cancelled["refund"]


def test_record_round_trips_and_rebuilds_the_transcript_with_forks(make_flights):
    from agentrl.core.trajectory import transcript

    env = make_flights(stochastic=True)
    actions, _ = oracle_run(env, 2, "cancel_rebook")
    env.reset(seed=2, options={"family": "cancel_rebook"})
    env.step(actions[0])
    (fork,) = env.fork()
    for action in actions[1:]:
        env.step(action)
        fork.step(action)
    record = json.loads(json.dumps(env.trajectory(), allow_nan=False))
    assert record == env.trajectory() and transcript(record) == env.messages
    assert record["task_id"] and record["seed"] == 2 and record["env_id"] == "agentrl/Flights-v0"
    assert [t["function"]["name"] for t in record["tools"]] == list(env.tools)
    (child,) = record["forks"]
    assert child["at_step"] == 1 and child["trajectory"]["steps"] == record["steps"][1:]
    for step in record["steps"]:
        for c in step["calls"]:
            assert c["name"] in env.tools and isinstance(c["arguments"], dict)
            assert c["result"] in step["observation"]


def test_the_change_log_stays_out_of_fingerprint_and_verdict(make_flights):
    env = make_flights()
    actions, results = oracle_run(env, 4, "cheapest")
    assert results[-1][1] == 1.0  # the verifier judged a database whose change log has rows
    assert env._raw.execute("SELECT count(*) FROM agentrl_changes").fetchone()[0] > 0
    before = env.fingerprint()
    env._raw.execute("INSERT INTO agentrl_changes (tbl, op) VALUES ('x', 'insert')")
    assert env.fingerprint() == before


def test_every_world_template_puts_each_table_at_the_same_root_page():
    """One connection deserializes one world after another; SQLite keeps its cached schema when the
    schema cookie matches, so every template must have the same layout (the change log included)."""
    import sqlite3

    from agentrl.flights.templates import WORLDS

    def layout(split: str, index: int, days: int) -> list[tuple]:
        conn = sqlite3.connect(":memory:")
        conn.deserialize(WORLDS.get(split, index, days).image)
        return conn.execute("SELECT type, name, rootpage FROM sqlite_master ORDER BY name").fetchall()

    first = layout("train", 1, 1)
    assert any(name == "agentrl_changes" for _, name, _ in first)
    assert layout("train", 2, 1) == first and layout("test", 5, 3) == first
