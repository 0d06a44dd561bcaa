"""The oracle solves every task of both splits from text and tools alone; wrong moves score 0."""

import json

import pytest

from agentrl.core import tool_call as call
from agentrl.demo import export_oracle_jsonl, play_episode
from agentrl.flights.oracle import OraclePolicy, parse_request
from agentrl.flights.tasks import FAMILIES, LEVELS, N_INFEASIBLE, N_REFUSED, OUTCOME_BLOCK

N_TASKS = OUTCOME_BLOCK  # per family and split: one block, so every outcome is there


@pytest.mark.parametrize("stochastic", [False, True], ids=["static", "stochastic"])
@pytest.mark.parametrize("split", ["train", "test"])
def test_oracle_solves_every_task(make_flights, split, stochastic):
    env = make_flights(stochastic=stochastic, privileged_info=True, split=split)
    failures, outcomes = [], {}
    base = 90_000 if split == "test" else 0
    for family in FAMILIES:
        for seed in range(base, base + N_TASKS):
            level = LEVELS[seed % 3]
            transcript = play_episode(env, OraclePolicy(), seed, {"family": family, "level": level})
            outcome = transcript["task"]["outcome"]
            outcomes[(family, outcome)] = outcomes.get((family, outcome), 0) + 1
            if transcript["reward"] != 1.0:
                failures.append((family, seed, level, outcome))
    assert failures == []
    for family in FAMILIES:  # the documented rates, exactly, per block of seeds
        assert outcomes[(family, "infeasible")] == N_INFEASIBLE
        assert outcomes[(family, "refused")] == N_REFUSED


def test_stochastic_world_really_moves(make_flights):
    env = make_flights(stochastic=True)
    text = ""
    for seed in range(40):
        text += "".join(s["observation"] for s in play_episode(env, OraclePolicy(), seed)["steps"])
    assert "service busy" in text and "fares on this route changed" in text


def _play_until(env, seed, options, stop):
    """Run the oracle until its next action contains `stop`; returns that action (not yet taken)."""
    obs, info = env.reset(seed=seed, options=options)
    policy = OraclePolicy()
    action = policy(obs, info)
    while stop not in action:
        obs, _r, _t, _tr, info = env.step(action)
        action = policy(obs, info)
    return action


def _done_seeds(env, family, n, level=None):
    seeds = []
    for seed in range(1000):
        options = {"family": family, **({"level": level} if level else {})}
        if env.reset(seed=seed, options=options)[1]["task"]["outcome"] == "done":
            seeds.append(seed)
        if len(seeds) == n:
            return seeds
    raise AssertionError("too few done tasks")


def _stale_choice(env):
    """The flight a search before the fare rise shows as the answer: the cheapest at listed fares."""
    r, world = env.task.request, env.world
    fitting = [
        f
        for f in world.route_flights(*env.task.route)
        if r["depart_after"] <= world.flights[f]["departs"] <= r["depart_before"]
        and sum(world.free_counts[(f, r["cabin"])].values()) >= len(r["passengers"])
    ]
    return min(fitting, key=lambda f: world.fares[(f, r["cabin"])]["price"])


def test_booking_at_a_stale_price_scores_zero(make_flights):
    """Where the rise lands on the flight the first search showed as the answer (the rise is drawn
    over every flight the search lists, so a few seeds in a hundred), booking it again without
    searching is wrong: another flight is now the cheapest."""
    env = make_flights(fare_changes=True, privileged_info=True)
    rewards = []
    for seed in range(400):
        options = {"family": "cheapest", "level": 2}
        if env.reset(seed=seed, options=options)[1]["task"]["outcome"] != "done":
            continue
        if env.task.fare_change[0] != _stale_choice(env):
            continue
        action = _play_until(env, seed, options, "book_flight")
        booked = json.loads(action.removeprefix("<tool_call>").removesuffix("</tool_call>"))
        assert booked["arguments"]["flight_id"] == env.task.fare_change[0]
        assert "fares on this route changed" in env.step(action)[0]
        env.step(action)  # book the stale choice again without searching
        rewards.append(env.step(call("finish", outcome="done"))[1])
        if len(rewards) == 3:
            break
    assert 0.0 in rewards  # the rise made another flight the cheapest: the stale booking is wrong


def test_a_stray_booking_scores_zero(make_flights):
    env = make_flights(privileged_info=True)
    seed = _done_seeds(env, "cheapest", 1)[0]
    finish = _play_until(env, seed, {"family": "cheapest"}, "finish")
    request = env.task.request
    free = env.world.free_counts
    other = next(f for f in env.world.flights if f != env.task.target and sum(free[(f, "economy")].values()))
    booked = env.step(
        call(
            "book_flight",
            flight_id=other,
            cabin="economy",
            passenger_ids=request["passengers"],
            payment_method_id=request["payment_method_id"],
        )
    )[0]
    assert "confirmed" in booked
    assert env.step(finish)[1] == 0.0


@pytest.mark.parametrize("wrong", ["done", "infeasible", "refused"])
def test_the_declared_outcome_must_match(make_flights, wrong):
    """The right database with the wrong outcome scores 0, whatever the message says."""
    env = make_flights(privileged_info=True)
    checked = 0
    for seed in range(60):
        obs, info = env.reset(seed=seed, options={"family": FAMILIES[seed % 6]})
        if info["task"]["outcome"] == wrong:
            continue
        action = _play_until(env, seed, {"family": FAMILIES[seed % 6]}, '"finish"')
        right = json.loads(action.split("<tool_call>")[1].split("</tool_call>")[0])["arguments"]
        assert right["outcome"] == info["task"]["outcome"]
        assert env.step(call("finish", outcome=wrong, message=right["message"]))[1] == 0.0
        checked += 1
    assert checked > 10


def test_the_oracle_reads_the_request_from_the_text(make_flights):
    env = make_flights(privileged_info=True)
    for seed in range(60):
        for family in FAMILIES:
            obs, info = env.reset(seed=seed, options={"family": family})
            parsed, request = parse_request(obs), info["task"]["request"]
            if request["action"] == "change":  # the route comes from the booking, not the text
                parsed.update({k: request[k] for k in ("origin", "destination", "date", "depart_before")})
            assert parsed == request, (family, seed)


def test_oracle_jsonl_export(tmp_path):
    path = tmp_path / "oracle.jsonl"
    assert export_oracle_jsonl(path, 5, seed=3) == 5
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    first = lines[0]
    assert first["messages"][0]["role"] == "user" and first["tools"]
    assert first["task"]["outcome"] in {"done", "infeasible", "refused"}
    calls = [m for m in first["messages"] if m["role"] == "assistant"]
    assert calls[-1]["tool_calls"][0]["function"]["name"] == "finish"
    tool_msgs = [m for m in first["messages"] if m["role"] == "tool"]
    assert all(m["tool_call_id"].startswith("call_") for m in tool_msgs)
