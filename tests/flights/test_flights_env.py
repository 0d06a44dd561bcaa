"""Flights-v0 as a Gymnasium env: checker, determinism, bad input, tools."""

import functools
import json
import operator
import os
import subprocess
import sys
import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from agentrl.demo import play_episode
from agentrl.flights.oracle import OraclePolicy, RandomPolicy, call, last_response
from agentrl.flights.tasks import FAMILIES


def test_check_env_passes_without_warnings():
    env = gym.make("agentrl/Flights-v0").unwrapped
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env)
    env.close()


def test_both_id_forms_and_light_import():
    env = gym.make("agentrl:agentrl/Flights-v0")
    obs, info = env.reset(seed=1)
    assert "search_flights" in obs and info["tools"]
    env.close()
    code = "import sys, agentrl; print('sqlalchemy' in sys.modules, 'agentrl.flights.env' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


@pytest.mark.parametrize("kwargs", [{}, {"stochastic": True}, {"days": 3, "stochastic": True}])
def test_same_seed_same_world_observations_and_fingerprint(make_flights, kwargs):
    runs = []
    for _ in range(2):
        env = make_flights(**kwargs)
        for seed in range(6):
            transcript = play_episode(env, RandomPolicy(seed), seed, {"family": FAMILIES[seed % 7]})
            oracle = play_episode(env, OraclePolicy(), seed + 100)
            runs.append(
                (
                    transcript["task_text"],
                    [s["observation"] for s in transcript["steps"]],
                    [s["observation"] for s in oracle["steps"]],
                    env.fingerprint(),
                )
            )
    half = len(runs) // 2
    assert runs[:half] == runs[half:]
    assert len({r[3] for r in runs[:half]}) > 1  # the fingerprint does see differences


def test_different_seeds_differ_and_splits_use_other_worlds(make_flights):
    env = make_flights()
    a = env.reset(seed=1)[1]["task"]
    b = env.reset(seed=2)[1]["task"]
    t = env.reset(seed=1, options={"split": "test"})[1]["task"]
    assert a["text"] != b["text"]
    assert t["seed"] >= 1_000_000 and t["world"] != a["world"]


def test_malformed_actions_become_observations(make_flights):
    env = make_flights()
    env.reset(seed=3)
    bad = [
        "no call at all",
        "<tool_call>{not json}</tool_call>",
        '<tool_call>{"name": "fly_me", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "get_flight", "arguments": {"flight_id": "abc"}}</tool_call>',
        '<tool_call>{"name": "book_flight", "arguments": {"flight_id": 1}}</tool_call>',
        '<tool_call>{"name": "search_flights", "arguments": {"origin": "XXX", "destination": "SHA",'
        ' "date": "2026-03-02"}}</tool_call>',
        call("get_booking", pnr="NOPE99"),
        call("filter_flights", sort_by="price"),
    ]
    for action in bad:
        obs, reward, terminated, truncated, info = env.step(action)
        assert reward == 0.0 and not terminated
        assert "error" in obs or "No tool call" in obs
    assert (
        "flight_id"
        in env.step(
            '<tool_call>{"name": "search_flights", "args": {"from": "pek", "to": "SHA",'
            ' "date": "2026-03-02"}}</tool_call>'
        )[0]
    )


def test_search_is_mixed_and_filter_sorts(make_flights):
    env = make_flights()
    env.reset(seed=0, options={"family": "cheapest"})
    obs = env.step(call("search_flights", origin="PEK", destination="SHA", date="2026-03-02"))[0]
    results = last_response(obs)[1]["results"]
    assert {r["origin"] for r in results} == {"PEK", "PKX"}
    obs = env.step(call("filter_flights", origin="PEK", cabin="economy", sort_by="price"))[0]
    rows = last_response(obs)[1]["results"]
    prices = [r["fares"]["economy"]["price"] for r in rows]
    assert prices == sorted(prices) and all(r["origin"] == "PEK" for r in rows)


def test_cancel_refunds_by_fare_rules_and_releases_seat(make_flights):
    env = make_flights()
    _obs, info = env.reset(seed=4, options={"family": "cancel_rebook"})
    pnr = info["task"]["pnr"]
    booking = last_response(env.step(call("get_booking", pnr=pnr))[0])[1]
    seats = last_response(
        env.step(call("check_seats", flight_id=booking["flight"]["flight_id"], cabin=booking["cabin"]))[0]
    )[1]
    assert booking["seat"] not in functools.reduce(operator.iadd, seats["available"].values(), [])
    done = last_response(env.step(call("cancel_booking", pnr=pnr))[0])[1]
    assert done["refund"] == booking["fare_paid"] * booking["fare_rules"]["refund_pct"] // 100
    seats = last_response(
        env.step(call("check_seats", flight_id=booking["flight"]["flight_id"], cabin=booking["cabin"]))[0]
    )[1]
    assert booking["seat"] in functools.reduce(operator.iadd, seats["available"].values(), [])
    again = env.step(call("cancel_booking", pnr=pnr))[0]
    assert "already cancelled" in again


def test_progress_and_shaped_reward(make_flights):
    env = make_flights(shaped_reward=True, shaping=0.1)
    obs, info = env.reset(seed=7, options={"family": "seat", "level": 2})
    assert not any(info["progress"].values())
    policy, total, done = OraclePolicy(), 0.0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(policy(obs, info))
        total += reward
        done = terminated or truncated
    assert all(info["progress"].values())
    assert total == pytest.approx(1.0 + 0.1 * len(info["progress"]))


def test_max_turns_truncates(make_flights):
    env = make_flights(max_turns=2)
    env.reset(seed=0)
    assert not env.step("hello")[3]
    assert env.step("hello")[3]


def test_tool_specs_are_openai_functions(make_flights):
    env = make_flights()
    _obs, info = env.reset(seed=0)
    names = [t["function"]["name"] for t in info["tools"]]
    assert {
        "search_flights",
        "filter_flights",
        "get_flight",
        "check_seats",
        "book_flight",
        "get_booking",
        "cancel_booking",
        "change_booking",
        "finish",
    } <= set(names)
    json.dumps(info)  # info travels as JSON


def test_thirty_day_world_every_family(make_flights):
    env = make_flights(days=30, world_pool=1, stochastic=True)
    dates = set()
    for seed, family in enumerate(FAMILIES * 2):
        transcript = play_episode(env, OraclePolicy(), seed, {"family": family})
        assert transcript["reward"] == 1.0, (family, seed)
        dates.add(transcript["task"]["date"])
    assert len(dates) > 3  # requests spread over the month


def test_task_selection_by_kwargs_and_options(make_flights):
    env = make_flights(families=["budget"], levels=[2])
    task = env.reset(seed=3)[1]["task"]
    assert (task["family"], task["level"]) == ("budget", 2)
    task = env.reset(seed=3, options={"family": "seat", "level": 1, "split": "test"})[1]["task"]
    assert (task["family"], task["level"]) == ("seat", 1) and task["flight_number"]
    with pytest.raises(ValueError, match="unknown task famil"):
        env.reset(options={"family": "teleport"})
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"colour": "red"})
    with pytest.raises(ValueError):
        make_flights(split="validation")


def test_determinism_across_processes():
    code = (
        "import hashlib, gymnasium as gym, agentrl\n"
        "from agentrl.demo import play_episode\n"
        "from agentrl.flights.oracle import OraclePolicy\n"
        "env = gym.make('agentrl/Flights-v0', stochastic=True).unwrapped\n"
        "t = play_episode(env, OraclePolicy(), 42, {'family': 'cancel_rebook', 'level': 3})\n"
        "text = ''.join(s['observation'] for s in t['steps'])\n"
        "print(env.fingerprint(), hashlib.sha256(text.encode()).hexdigest(), t['reward'])\n"
        "print(len(t['steps']), t['steps'][-2]['observation'])\n"
    )
    outs = [
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(h)},
        ).stdout
        for h in (1, 2)
    ]
    assert outs[0] == outs[1] and "1.0" in outs[0]
