"""Flights-v0 as a Gymnasium env: checker, determinism, bad input, tools, policy enforcement."""

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

from agentrl.core import tool_call as call
from agentrl.demo import play_episode
from agentrl.flights.env import FlightsEnv
from agentrl.flights.geography import AIRPORT_CITY, CITY_AIRPORTS
from agentrl.flights.oracle import OraclePolicy, RandomPolicy, last_response, parse_request
from agentrl.flights.tasks import FAMILIES

PUBLIC_INFO = {"task_id", "split", "tools", "progress", "turn", "state_hash"}


def test_check_env_passes_without_warnings():
    env = gym.make("agentrl/Flights-v0").unwrapped
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env)
    env.close()


def test_both_id_forms_and_light_import():
    env = gym.make("agentrl:agentrl/Flights-v0")
    obs, info = env.reset(seed=1)
    assert "search_flights" in obs and "# Desk policy" in obs and info["tools"]
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
            transcript = play_episode(env, RandomPolicy(seed), seed, {"family": FAMILIES[seed % 6]})
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


def test_seeds_have_their_own_worlds_and_ids(make_flights):
    env = make_flights(privileged_info=True)
    a = env.reset(seed=1)[1]
    b = env.reset(seed=2)[1]
    t = env.reset(seed=1, options={"split": "test"})[1]
    assert a["task"]["text"] != b["task"]["text"] and a["task"]["world"] != b["task"]["world"]
    assert t["split"] == "test" and t["task"]["world"][0] == "test" and a["task"]["world"][0] == "train"
    again = env.reset(seed=1)[1]
    assert again["task_id"] == a["task_id"] and len({a["task_id"], b["task_id"], t["task_id"]}) == 3
    other_family = env.reset(
        seed=1, options={"family": "seat" if a["task"]["family"] != "seat" else "budget"}
    )
    assert other_family[1]["task_id"] != a["task_id"]
    assert a["task_id"].isalnum() and a["task"]["family"] not in a["task_id"]


def test_info_names_nothing_without_privileged_info(make_flights):
    env = make_flights()
    seen_progress = set()
    for seed in range(12):
        _obs, info = env.reset(seed=seed, options={"family": FAMILIES[seed % 6]})
        assert set(info) == PUBLIC_INFO
        seen_progress.add(json.dumps(info["progress"], sort_keys=True))
        _obs, _r, _t, _tr, info = env.step(call("get_flight", flight_id=1))
        assert set(info) == {"calls", "invalid_calls", "progress", "turn", "state_hash"}
    assert len(seen_progress) == 1 and not any(json.loads(seen_progress.pop()).values())
    assert "privileged_info" in FlightsEnv.operator_kwargs


def test_malformed_actions_become_observations(make_flights):
    env = make_flights()
    obs, _info = env.reset(seed=3)
    date = parse_request(obs)["date"]
    bad = [
        "no call at all",
        "<tool_call>{not json}</tool_call>",
        '<tool_call>{"name": "fly_me", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "get_flight", "arguments": {"flight_id": "abc"}}</tool_call>',
        '<tool_call>{"name": "book_flight", "arguments": {"flight_id": 1}}</tool_call>',
        call("search_flights", origin="XXX", destination="SHA", date=date),
        call("get_booking", pnr="NOPE99"),
        call("filter_flights", sort_by="price"),
        call("finish", message="All done, no problem!"),  # no outcome: not a finish
        call("finish", outcome="maybe"),
    ]
    for action in bad:
        obs, reward, terminated, truncated, info = env.step(action)
        assert reward == 0.0 and not terminated
        assert "error" in obs or "No tool call" in obs
    from_to = '{"name": "search_flights", "args": {"from": "pek", "to": "SHA", "date": "%s"}}'
    from_to = f"<tool_call>{from_to}</tool_call>"
    assert "count" in env.step(from_to % date)[0]


def _book_request(env, seed, outcome="done"):
    """Reset to a seed whose task is a one-passenger booking with the given outcome."""
    for s in range(seed, seed + 400):
        obs, info = env.reset(seed=s, options={"family": "cheapest"})
        if info["task"]["outcome"] == outcome:
            return obs, info
    raise AssertionError("no such task")


def test_search_lists_the_cities_and_filter_sorts(make_flights):
    env = make_flights(privileged_info=True)
    obs, _info = _book_request(env, 0)
    r = parse_request(obs)
    results = last_response(
        env.step(call("search_flights", origin=r["origin"], destination=r["destination"], date=r["date"]))[0]
    )[1]["results"]
    cities = {AIRPORT_CITY[r["origin"]]}
    assert {AIRPORT_CITY[x["origin"]] for x in results} == cities
    assert len({x["origin"] for x in results} | {x["destination"] for x in results}) > 2  # other airports too
    rows = last_response(
        env.step(call("filter_flights", origin=r["origin"], cabin="economy", sort_by="price"))[0]
    )[1]["results"]
    prices = [x["fares"]["economy"]["price"] for x in rows]
    assert prices == sorted(prices) and all(x["origin"] == r["origin"] for x in rows)
    assert all(len(CITY_AIRPORTS[c]) >= 1 for c in cities)


def test_another_passengers_card_is_an_error(make_flights):
    env = make_flights(privileged_info=True)
    obs, info = _book_request(env, 10)
    r = parse_request(obs)
    stranger = next(p for p in env.world.passenger_ids if p not in r["passengers"])
    card = next(pm["id"] for pm in env.world.rows["payment_methods"] if pm["passenger_id"] == stranger)
    target = info["task"]["target_flight"]
    obs = env.step(
        call(
            "book_flight",
            flight_id=target,
            cabin=r["cabin"],
            passenger_ids=r["passengers"],
            payment_method_id=card,
        )
    )[0]
    assert "belongs to a customer who is not on this booking" in obs
    assert env.fingerprint() == _fresh_fingerprint(env)
    assert env.step(call("finish", outcome="done"))[1] == 0.0


def _fresh_fingerprint(env):
    twin = FlightsEnv()
    from agentrl.flights.templates import WORLDS

    WORLDS.copy_into(env.world, twin._raw)
    try:
        return twin.fingerprint()
    finally:
        twin.close()


def test_cancel_refunds_by_fare_rules_and_releases_seat(make_flights):
    env = make_flights()
    obs, _info = env.reset(seed=4, options={"family": "cancel_rebook"})
    pnr = parse_request(obs)["pnr"]
    booking = last_response(env.step(call("get_booking", pnr=pnr))[0])[1]
    assert set(booking["fare_rules"]) == {"refund_pct", "change_fee", "changeable"}
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
    assert "already cancelled" in env.step(call("cancel_booking", pnr=pnr))[0]


def test_progress_and_shaped_reward(make_flights):
    env = make_flights(shaped_reward=True, shaping=0.1)
    for seed, family in enumerate(FAMILIES):
        obs, info = env.reset(seed=seed, options={"family": family, "level": 2})
        assert not any(info["progress"].values())
        policy, total, done = OraclePolicy(), 0.0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(policy(obs, info))
            total += reward
            done = terminated or truncated
        assert all(info["progress"].values()), family
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
        "get_passenger",
        "book_flight",
        "get_booking",
        "cancel_booking",
        "change_booking",
        "finish",
    } <= set(names)
    finish = next(t for t in info["tools"] if t["function"]["name"] == "finish")["function"]["parameters"]
    assert finish["required"] == ["outcome"]
    json.dumps(info)  # info travels as JSON


def test_thirty_day_world_every_family(make_flights):
    env = make_flights(days=30, stochastic=True, privileged_info=True)
    dates = set()
    for seed, family in enumerate(FAMILIES * 2):
        transcript = play_episode(env, OraclePolicy(), seed % 2, {"family": family})
        assert transcript["reward"] == 1.0, (family, seed)
        dates.add(transcript["task"]["request"]["date"])
    assert len(dates) > 3  # requests spread over the month


def test_task_selection_by_kwargs_and_options(make_flights):
    env = make_flights(families=["budget"], levels=[2], privileged_info=True)
    task = env.reset(seed=3)[1]["task"]
    assert (task["family"], task["level"]) == ("budget", 2)
    info = env.reset(seed=3, options={"family": "seat", "level": 1, "split": "test"})[1]
    assert (info["task"]["family"], info["task"]["level"], info["split"]) == ("seat", 1, "test")
    assert info["task"]["request"]["seat_position"]
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
