"""Flights-v0's deterministic customer: the opening hides the rest of the request; every keyword rule,
one by one; an unknown question's fixed answer; the asking oracle solves every family through
questions; same seed, same conversation; forks copy the customer; records keep its turns; served
over HTTP on loopback."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentrl  # noqa: F401  (registers the ids)
from agentrl.core import tool_call as call
from agentrl.demo import play_episode
from agentrl.flights.asking import QUESTIONS, AskFirst, read_request
from agentrl.flights.customer import (
    CONSTRAINTS,
    EMPTY_REPLY,
    RULES,
    UNKNOWN_REPLY,
    answers,
    asked,
)
from agentrl.flights.oracle import OraclePolicy
from agentrl.flights.tasks import FAMILIES, LEVELS
from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread

FLIGHTS = "agentrl/Flights-v0"
N_TASKS = 40  # per family and split: one block of seeds, every outcome
# one question per stem, each naming nothing else the rules know
STEM_QUESTIONS = {
    "booking": ["Which booking is it?", "Your reservation?", "The PNR?", "Confirmation code?", "Reference?"],
    "date": ["What date?", "Which day?", "When?"],
    "cabin": ["Which cabin?", "Which class?", "Economy?", "Business?"],
    "passengers": ["Passengers?", "Traveler?", "Traveller?", "Who?", "Your name?", "People?", "Person?",
                   "How many?"],
    "payment": ["Pay how?", "Card?", "Charge what?", "Method?", "Billing?"],
    "time": ["Time?", "Departure?", "Leaving?", "Hours?", "Morning?", "Afternoon?", "Evening?"],
    "budget": ["Budget?", "Price?", "Cost?", "Spend?", "Afford?", "Maximum?"],
    "seat": ["Seat?", "Window?", "Aisle?"],
    "constraints": ["Constraints?", "Requirements?", "Preferences?", "Restrictions?"],
}


@pytest.fixture
def make_env():
    envs = []

    def make(**kwargs):
        env = gym.make(FLIGHTS, user="deterministic", privileged_info=True, **kwargs).unwrapped
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


def test_every_rule_and_stem_is_tested():
    assert set(STEM_QUESTIONS) == {fact for fact, _stems in RULES}
    assert all(len(STEM_QUESTIONS[fact]) == len(stems) for fact, stems in RULES)


@pytest.mark.parametrize("fact,question", [(f, q) for f, qs in STEM_QUESTIONS.items() for q in qs])
def test_each_keyword_rule_alone(make_env, fact, question):
    env = make_env()
    env.reset(seed=5, options={"family": "cancel_rebook", "level": 3})
    want = list(CONSTRAINTS) if fact == "constraints" else [fact]
    assert asked(question) == want
    known = answers(env.task.request, env.customer.names)
    assert env.step(question)[0] == " ".join(known[f] for f in want)


def test_words_that_only_look_like_keywords_ask_nothing(make_env):
    env = make_env()
    env.reset(seed=5)
    for message in ("Tell me everything.", "Hello there!", "The whole thing, please.", "Thanks."):
        assert asked(message) == []
        assert env.step(message)[0] == UNKNOWN_REPLY
    assert env.step("   ")[0] == EMPTY_REPLY
    assert len(env.customer.turns) == 4  # the empty message reached no one


def test_several_facts_in_one_question_come_in_rule_order(make_env):
    env = make_env()
    env.reset(seed=7, options={"family": "budget"})
    known = answers(env.task.request, env.customer.names)
    reply = env.step("Which seat, and what budget? And the date?")[0]
    assert reply == " ".join([known["date"], known["budget"], known["seat"]])


@pytest.mark.parametrize("family", FAMILIES)
def test_the_opening_gives_goal_and_route_only(make_env, family):
    env = make_env()
    for seed in range(90_000, 90_012):
        observation, info = env.reset(seed=seed, options={"family": family, "level": LEVELS[seed % 3]})
        opening = observation.split("# Customer request\n", 1)[1].split("\n\n# Tools", 1)[0]
        r = env.task.request
        hidden = [r["date"], r["payment_method_id"], r["pnr"], *r["passengers"], r["cabin"],
                  r["seat_position"], str(r["max_price"]) if r["max_price"] else None,
                  *(t for t in (r["depart_after"], r["depart_before"]) if t not in ("00:00", "23:59"))]
        assert [h for h in hidden if h and h in opening] == []
        if r["action"] != "change":
            assert f"({r['origin']})" in opening and f"({r['destination']})" in opening
        assert r["choose"] in opening
        assert info["task"]["text"] not in observation


def test_the_default_is_still_the_whole_request(make_flights):
    env = make_flights(privileged_info=True)
    observation, info = env.reset(seed=3)
    assert info["task"]["text"] in observation and env.customer is None
    assert "No tool call found" in env.step("What date?")[0]
    with pytest.raises(ValueError, match="user must be"):
        make_flights(user="scripted")
    with pytest.raises(ValueError, match="user_model and user_base_url"):
        make_flights(user="llm")


def test_replies_read_back_to_the_request(make_env):
    """What `AskFirst` reads from the customer is the task's own request, names included."""
    env = make_env()
    for family in FAMILIES:
        for seed in range(6):
            observation, _ = env.reset(seed=seed, options={"family": family, "level": LEVELS[seed % 3]})
            opening = observation.split("# Customer request\n", 1)[1].split("\n\n", 1)[0]
            replies = " ".join(env.step(q)[0] for q in QUESTIONS.values())
            request, names = read_request(opening, replies)
            want = dict(env.task.request)
            if want["action"] == "change":  # the opening names no route; the oracle reads it from the booking
                request.update(origin=want["origin"], destination=want["destination"])
            assert request == want
            assert names == env.customer.names


@pytest.mark.parametrize("split", ["train", "test"])
def test_the_asking_oracle_solves_every_family(make_env, split):
    env = make_env(split=split)
    base = 90_000 if split == "test" else 0
    failures = []
    for family in FAMILIES:
        for seed in range(base, base + N_TASKS):
            transcript = play_episode(env, AskFirst(OraclePolicy(), one_by_one=True), seed,
                                      {"family": family, "level": LEVELS[seed % 3]})
            if transcript["reward"] != 1.0:
                failures.append((family, seed))
            assert transcript["steps"][0]["action"] != transcript["steps"][0]["observation"]
    assert failures == []


@pytest.mark.parametrize("granularity", ["coarse", "default", "fine"])
def test_the_asking_oracle_in_the_moving_world(make_env, granularity):
    env = make_env(stochastic=True, granularity=granularity)
    for family in FAMILIES:
        for seed in range(90_000, 90_006):
            policy = AskFirst(OraclePolicy(), one_by_one=seed % 2 == 0)
            options = {"family": family, "level": LEVELS[seed % 3]}
            assert play_episode(env, policy, seed, options)["reward"] == 1.0


def _conversation(env, seed: int) -> list[str]:
    observation, info = env.reset(seed=seed)
    policy, seen = AskFirst(OraclePolicy(), one_by_one=True), [observation]
    done = False
    while not done:
        observation, _reward, terminated, truncated, info = env.step(policy(observation, info))
        seen.append(observation)
        done = terminated or truncated
    return seen


def test_same_seed_same_conversation(make_env):
    a, b = make_env(stochastic=True), make_env(stochastic=True)
    for seed in (1, 2, 90_003):
        assert _conversation(a, seed) == _conversation(b, seed)
    assert _conversation(a, 1) != _conversation(a, 2)


def test_forks_copy_the_customer_and_records_keep_its_turns(make_env):
    env = make_env()
    env.reset(seed=11, options={"family": "seat"})
    env.step("What date?")
    (child,) = env.fork()
    assert child.customer is not env.customer and child.customer.turns == env.customer.turns
    assert child.step("Which seat?")[0] == env.step("Which seat?")[0]
    child.step("Which cabin?")
    assert len(child.customer.turns) == 3 and len(env.customer.turns) == 2  # independent from here
    record = env.trajectory()
    assert record["meta"]["user"]["kind"] == "deterministic"
    (respond,) = record["steps"][0]["calls"]
    assert respond["name"] == "respond" and respond["arguments"] == {"content": "What date?"}
    assert respond["result"] == record["steps"][0]["observation"]
    assert record["forks"][0]["at_step"] == 1
    assert env.step(call("finish", outcome="done", message="x"))[2]  # tools still work after questions
    child.close()


@pytest.fixture(scope="module")
def base_url():
    with serve_in_thread(ServerConfig(env_ids=(FLIGHTS,))) as url:
        yield url


def test_served_over_http(base_url, make_env):
    local = make_env()
    remote = gym.make(FLIGHTS, base_url=base_url, user="deterministic").unwrapped
    try:
        got, want = remote.reset(seed=21), local.reset(seed=21)
        assert got[0] == want[0]
        for question in ("When?", "Who travels?", "How do you pay?"):
            assert remote.step(question)[0] == local.step(question)[0]
        (child,) = remote.fork()
        assert child.step("Which seat?")[0] == local.step("Which seat?")[0]
        assert remote.trajectory()["meta"]["user"]["kind"] == "deterministic"
        child.close()
    finally:
        remote.close()


def test_what_the_customer_told_is_part_of_the_state(make_env):
    """`state_hash` names what the agent knows: a reply changes it, in whatever order it came."""
    a, b = make_env(), make_env()
    before = a.reset(seed=3)[1]["state_hash"]
    b.reset(seed=3)
    asked_date = a.step("When?")[4]["state_hash"]
    assert asked_date != before
    both = a.step("Which seat?")[4]["state_hash"]
    assert b.step("Which seat?")[4]["state_hash"] not in (before, asked_date)
    assert b.step("When?")[4]["state_hash"] == both
