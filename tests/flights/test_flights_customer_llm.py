"""Flights-v0's chat-model customer (`user="llm"`) against an OpenAI-compatible server on loopback
that plays the rule customer from the fact lines of its system message: the asking oracle solves
every family through it, its conversation is the rule customer's, requests carry the model's
settings and the chat in order, forks continue their own conversation, progress waits for what it
has told, and a failing endpoint is loud."""

from __future__ import annotations

from typing import Any

import pytest
from support import AppServer, chat_app

from agentrl.core import tool_call as call
from agentrl.core.users import UserModelError
from agentrl.demo import play_episode
from agentrl.flights.asking import QUESTIONS, AskFirst
from agentrl.flights.customer import FACTS_HEADING, GREETING, LLM_GUIDELINES, UNKNOWN_REPLY, asked
from agentrl.flights.oracle import OraclePolicy
from agentrl.flights.tasks import FAMILIES, LEVELS

SEEDS = range(90_000, 90_004)  # per family


def rule_answer(body: dict[str, Any]) -> str:
    """The last message answered by the keyword rules over the fact lines (`- fact: reply`) of the
    system message."""
    lines = body["messages"][0]["content"].split(FACTS_HEADING, 1)[1].splitlines()
    facts = dict(line[2:].split(": ", 1) for line in lines if line.startswith("- "))
    wanted = asked(body["messages"][-1]["content"])
    return " ".join(facts[f] for f in wanted) if wanted else UNKNOWN_REPLY


@pytest.fixture(scope="module")
def server():
    requests: list[dict[str, Any]] = []
    with AppServer(chat_app(requests, rule_answer)) as served:
        served.requests = requests  # type: ignore[attr-defined]
        yield served


@pytest.fixture
def llm_env(make_flights, server):
    return lambda **kw: make_flights(user="llm", user_model="customer-1", user_base_url=server.url + "/v1",
                                     privileged_info=True, **kw)


def test_the_asking_oracle_solves_every_family_through_the_model(llm_env, server):
    env = llm_env(split="test", user_temperature=0.3, user_seed=7)
    server.requests.clear()
    for family in FAMILIES:
        for seed in SEEDS:
            policy = AskFirst(OraclePolicy(), one_by_one=seed % 2 == 0)
            transcript = play_episode(env, policy, seed, {"family": family, "level": LEVELS[seed % 3]})
            assert transcript["reward"] == 1.0, (family, seed)
    body = server.requests[-1]
    assert (body["model"], body["temperature"], body["seed"]) == ("customer-1", 0.3, 7)
    system = body["messages"][0]["content"]
    assert system.startswith(LLM_GUIDELINES) and env.task.text in system
    assert env.trajectory()["meta"]["user"] == {"kind": "llm", "model": "customer-1",
                                                "base_url": server.url + "/v1", "temperature": 0.3, "seed": 7}


def _conversation(env: Any, seed: int) -> list[str]:
    observation, info = env.reset(seed=seed, options={"family": "cancel_rebook"})
    seen = [observation]
    seen += [env.step(question)[0] for question in [*QUESTIONS.values(), "Thanks!"]]
    return seen


def test_the_models_conversation_is_the_rule_customers(llm_env, make_flights, server):
    """The first observation is the rule customer's, and so is every reply the server gave: the
    model saw the greeting, the opening as its own turn, then each question in order."""
    llm, rules = llm_env(), make_flights(user="deterministic")
    server.requests.clear()
    for seed in (1, 2):
        assert _conversation(llm, seed) == _conversation(rules, seed)
    chat = server.requests[-1]["messages"]
    assert [m["role"] for m in chat[:4]] == ["system", "user", "assistant", "user"]
    assert chat[1]["content"] == GREETING and chat[2]["content"] == llm.customer.opening()
    assert [m["content"] for m in chat if m["role"] == "user"][1:] == [*QUESTIONS.values(), "Thanks!"]
    assert llm.customer.turns[-1] == {"message": "Thanks!", "reply": UNKNOWN_REPLY}


def test_forks_continue_their_own_conversation(llm_env):
    env = llm_env()
    env.reset(seed=11, options={"family": "seat"})
    env.step("What date?")
    (child,) = env.fork()
    assert child.customer.user.chat == env.customer.user.chat
    assert child.customer.user.chat is not env.customer.user.chat
    assert child.step("Which seat?")[0] == env.step("Which seat?")[0]
    child.step("Which cabin?")
    assert len(child.customer.user.chat) == len(env.customer.user.chat) + 2
    record = env.trajectory()
    assert [c["name"] for s in record["steps"] for c in s["calls"]] == ["respond", "respond"]
    child.close()


def test_progress_waits_for_what_the_model_has_told(llm_env):
    env = llm_env()
    env.reset(seed=4, options={"family": "cheapest"})
    r = env.task.request
    guess = call("get_passenger", passenger_id=r["passengers"][0])
    assert not env.step(guess)[4]["progress"]["looked_up_customer"]
    assert r["passengers"][0] in env.step("Who travels?")[0]
    assert env.step(guess)[4]["progress"]["looked_up_customer"]


def test_a_failing_endpoint_is_loud(make_flights, server):
    env = make_flights(user="llm", user_model="m", user_base_url=server.url + "/nothing-here")
    env.reset(seed=0)  # the opening is the rule customer's: no request yet
    with pytest.raises(UserModelError, match="404"):
        env.step("What date?")
