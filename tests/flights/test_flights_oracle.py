"""Task families: the oracle solves all, random and do-nothing agents do not."""

import json

import pytest

from agentrl.demo import play_episode
from agentrl.flights.oracle import (
    OraclePolicy,
    RandomPolicy,
    call,
    do_nothing_policy,
    export_oracle_jsonl,
)
from agentrl.flights.tasks import FAMILIES, LEVELS

N_TASKS = 500  # per family, levels cycled


@pytest.mark.parametrize("stochastic", [False, True], ids=["static", "stochastic"])
@pytest.mark.parametrize("family", FAMILIES)
def test_oracle_solves_every_task(make_flights, family, stochastic):
    env = make_flights(stochastic=stochastic)
    failures = []
    for seed in range(N_TASKS):
        level = LEVELS[seed % 3]
        transcript = play_episode(env, OraclePolicy(), seed, {"family": family, "level": level})
        if transcript["reward"] != 1.0:
            failures.append((seed, level))
    assert failures == []


def test_stochastic_world_really_moves(make_flights):
    env = make_flights(stochastic=True)
    text = ""
    for seed in range(40):
        text += "".join(s["observation"] for s in play_episode(env, OraclePolicy(), seed)["steps"])
    assert "service busy" in text and "fares on this route changed" in text


@pytest.mark.parametrize("family", FAMILIES)
def test_do_nothing_scores_zero(make_flights, family):
    env = make_flights()
    for seed in range(12):
        options = {"family": family, "level": LEVELS[seed % 3]}
        assert play_episode(env, do_nothing_policy, seed, options)["reward"] == 0.0
        assert play_episode(env, lambda o, i: "thinking...", seed, options)["reward"] == 0.0


def test_random_agent_scores_near_zero(make_flights):
    env = make_flights(max_turns=15)
    rewards = [play_episode(env, RandomPolicy(seed), seed)["reward"] for seed in range(150)]
    assert sum(rewards) / len(rewards) < 0.05


def _play_until(env, seed, options, stop):
    """Run the oracle until its next action contains `stop`; returns that action (not yet taken)."""
    obs, info = env.reset(seed=seed, options=options)
    policy = OraclePolicy()
    action = policy(obs, info)
    while stop not in action:
        obs, _r, _t, _tr, info = env.step(action)
        action = policy(obs, info)
    return action


def test_booking_at_a_stale_price_scores_zero(make_flights):
    env = make_flights(fare_changes=True)
    rewards = []
    for seed in range(20):
        action = _play_until(env, seed, {"family": "cheapest", "level": 2}, "book_flight")
        assert "fares on this route changed" in env.step(action)[0]
        env.step(action)  # book the stale choice again without searching
        rewards.append(env.step(call("finish", message="done"))[1])
    assert 0.0 in rewards  # the rise made another flight the cheapest: the stale booking is wrong


def test_a_stray_booking_scores_zero(make_flights):
    env = make_flights()
    finish = _play_until(env, 12, {"family": "cheapest"}, "finish")
    task = env.task.request
    env.step(
        call(
            "book_flight",
            flight_id=1,
            cabin="economy",
            passenger_ids=["P1024"],
            payment_method_id=task["payment_method_id"],
        )
    )
    assert env.step(finish)[1] == 0.0


def test_oracle_jsonl_export(tmp_path):
    path = tmp_path / "oracle.jsonl"
    assert export_oracle_jsonl(path, 5, seed=3) == 5
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    first = lines[0]
    assert first["messages"][0]["role"] == "user" and first["tools"]
    calls = [m for m in first["messages"] if m["role"] == "assistant"]
    assert calls[-1]["tool_calls"][0]["function"]["name"] == "finish"
    tool_msgs = [m for m in first["messages"] if m["role"] == "tool"]
    assert all(m["tool_call_id"].startswith("call_") for m in tool_msgs)
