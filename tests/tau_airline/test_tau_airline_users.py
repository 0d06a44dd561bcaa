"""The customer in the loop: a scripted customer, a chat-model customer through an
OpenAI-compatible server on loopback, forks (the customer's state is copied), records (the
customer's turns and settings are in them), determinism, and the env served over HTTP."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from support import AppServer, chat_app
from tau_helpers import DATA, call, responses

import agentrl  # noqa: F401
from agentrl.core.trajectory import transcript
from agentrl.core.users import STOP, UserModelError
from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread
from agentrl.tau_airline.env import TauAirlineEnv, gold_actions

TAU = "agentrl/TauAirline-v0"
REFUSAL_TASK = 4
TURNS = ["Hi, I need to cancel a trip.", "It is RES004, user cole_vance_202.", "Fine, thanks.", STOP]


def turn_answer(body: dict) -> str:
    """The customer answers by how many turns it has had."""
    said = sum(1 for m in body["messages"] if m["role"] == "assistant")
    return TURNS[min(said, len(TURNS) - 1)]


def test_scripted_user_conversation():
    env = TauAirlineEnv(DATA, user_turns=TURNS[:3])
    observation, info = env.reset(seed=0, options={"task_index": REFUSAL_TASK})
    assert observation.endswith("# Customer\n" + TURNS[0]) and info["user"] == {
        "kind": "scripted",
        "turns": 3,
    }
    assert "# Airline policy\n# Test airline agent policy" in observation
    observation, reward, terminated, *_ = env.step("Could you give me your user id and reservation?")
    assert observation == TURNS[1] and not terminated
    observation, *_ = env.step(call("get_reservation_details", reservation_id="RES004"))
    assert "RES004" in observation
    observation, reward, terminated, *_ = env.step("I'm sorry, but I cannot cancel it under our policy.")
    assert observation == TURNS[2] and not terminated
    observation, reward, terminated, _, info = env.step("Anything else?")
    assert observation == STOP and terminated and reward == 1.0 and info["reward_info"]["r_actions"]
    env.close()


def test_scripted_turns_per_reset_and_empty_messages():
    env = TauAirlineEnv(DATA)
    observation, _ = env.reset(seed=0, options={"task_index": 1})
    assert observation.endswith(env.data.tasks[1].instruction)  # default: the instruction, once
    observation, reward, terminated, *_ = env.step("   ")
    assert observation.startswith("Empty message") and not terminated
    observation, _ = env.reset(seed=0, options={"task_index": 1, "user_turns": ["one", "two"]})
    assert observation.endswith("one") and env.step("hello")[0] == "two"
    with pytest.raises(ValueError, match="user_turns"):
        env.reset(seed=0, options={"task_index": 1, "user_turns": "one"})
    with pytest.raises(ValueError, match="task_index"):
        env.reset(seed=0, options={"task_index": 99})


def test_llm_user_against_an_openai_compatible_server():
    requests: list[dict] = []
    with AppServer(chat_app(requests, turn_answer)) as server:
        env = TauAirlineEnv(
            DATA,
            user="llm",
            user_model="customer-1",
            user_base_url=server.url + "/v1",
            user_temperature=0.7,
            user_seed=11,
        )
        observation, info = env.reset(seed=0, options={"task_index": REFUSAL_TASK})
        assert observation.endswith(TURNS[0]) and info["user"]["model"] == "customer-1"
        assert env.step("Your reservation id?")[0] == TURNS[1]
        assert env.step("I'm sorry, but I cannot cancel it.")[0] == TURNS[2]
        observation, reward, terminated, *_ = env.step("Goodbye.")
        assert observation == STOP and terminated and reward == 1.0
        record = env.trajectory()
        env.close()
    first, last = requests[0], requests[-1]
    assert first["model"] == "customer-1" and first["temperature"] == 0.7 and first["seed"] == 11
    assert env.data.tasks[REFUSAL_TASK].instruction in first["messages"][0]["content"]
    # the customer sees the agent's messages as the other party's and its own replies as its own
    assert [m["role"] for m in last["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert last["messages"][-1]["content"] == "Goodbye."
    assert record["meta"]["user"] == {
        "kind": "llm",
        "model": "customer-1",
        "base_url": server.url + "/v1",
        "temperature": 0.7,
        "seed": 11,
    }
    assert [c["name"] for s in record["steps"] for c in s["calls"]] == ["respond"] * 3


def test_llm_user_failure_is_loud():
    with AppServer(chat_app([], turn_answer)) as server:
        env = TauAirlineEnv(DATA, user="llm", user_model="m", user_base_url=server.url + "/nothing-here")
        with pytest.raises(UserModelError, match="404"):
            env.reset(seed=0, options={"task_index": 0})
    with pytest.raises(ValueError, match="user_model and user_base_url"):
        TauAirlineEnv(DATA, user="llm")


def test_forks_copy_the_database_and_the_customer():
    env = TauAirlineEnv(DATA, user_turns=TURNS[:3])
    env.reset(seed=0, options={"task_index": 0})
    env.step("Hello")  # the customer is at their second turn
    env.step(call("cancel_reservation", reservation_id="RES001"))
    (child,) = env.fork()
    # the fork has the parent's changes so far, even those not yet committed in the parent's session
    seen = json.loads(
        responses(child.step(call("get_reservation_details", reservation_id="RES001"))[0])[0]["content"]
    )
    assert seen["status"] == "cancelled"
    for e in (env, child):
        assert e.step("And?")[0] == TURNS[2]  # each continues the same conversation on its own
    child.step(call("cancel_reservation", reservation_id="RES002"))
    parent_view = json.loads(
        json.loads(env.step(call("get_reservation_details", reservation_id="RES002"))[0].split("\n")[1])[
            "content"
        ]
    )
    assert "status" not in parent_view  # the child's cancellation stayed in the child's database
    record = env.trajectory()
    assert record["forks"][0]["at_step"] == 2 and len(record["forks"][0]["trajectory"]["steps"]) == 3
    step = record["steps"][1]
    assert step["state_change"]["reservations"]["RES001"]["status"] == "cancelled"
    assert transcript(record) == env.messages
    env.close()
    child.close()


def test_a_fork_after_the_gold_scores_like_its_parent():
    env = TauAirlineEnv(DATA)
    env.reset(seed=0, options={"task_index": 1})
    *calls, goodbye = gold_actions(env.data.tasks[1])
    for action in calls:
        env.step(action)
    forks = env.fork(2)
    assert [f.step(goodbye)[1] for f in (*forks, env)] == [1.0, 1.0, 1.0]
    for e in (*forks, env):
        e.close()


def test_same_seed_same_observations():
    def run(seed: int) -> list[str]:
        env = TauAirlineEnv(DATA)
        observation, info = env.reset(seed=seed)
        seen = [observation]
        for action in gold_actions(env.data.tasks[info["task_index"]]):
            seen.append(env.step(action)[0])
            if env.episode_over:
                break
        env.close()
        return seen

    assert run(3) == run(3)
    assert len({run(s)[0] for s in range(6)}) > 1  # the seed draws the task


@pytest.fixture(scope="module")
def base_url():
    config = ServerConfig(env_ids=(TAU,), env_kwargs={TAU: {"data_dir": str(DATA)}})
    with serve_in_thread(config) as url:
        yield url


def test_served_over_http(base_url):
    remote = gym.make(TAU, base_url=base_url)
    local = TauAirlineEnv(DATA)
    try:
        observations = [
            remote.reset(seed=0, options={"task_index": 0}),
            local.reset(seed=0, options={"task_index": 0}),
        ]
        assert observations[0][0] == observations[1][0]
        for action in gold_actions(local.data.tasks[0]):
            got, want = remote.step(action), local.step(action)
            assert got[:4] == want[:4]
        assert got[1] == 1.0 and got[2]
        remote_record, local_record = remote.unwrapped.trajectory(), local.trajectory()
        assert (
            remote_record["steps"] == local_record["steps"] and remote_record["meta"] == local_record["meta"]
        )
    finally:
        remote.close()
        local.close()


def test_a_client_cannot_point_the_server_elsewhere(base_url):
    from agentrl.client import EnvClient, InvalidRequestError

    with EnvClient(base_url) as client, pytest.raises(InvalidRequestError, match="data_dir"):
        client.create_episode(TAU, env_kwargs={"data_dir": "/etc"})


def test_forked_over_http(base_url):
    remote = gym.make(TAU, base_url=base_url, user_turns=TURNS[:3]).unwrapped
    try:
        remote.reset(seed=0, options={"task_index": REFUSAL_TASK})
        assert remote.step("Hello")[0] == TURNS[1]
        (child,) = remote.fork()
        assert (
            child.step("Go on")[0] == remote.step("Go on")[0] == TURNS[2]
        )  # the customer's state was copied
        child.step(call("cancel_reservation", reservation_id="RES004"))
        assert child.step("Done.")[1] == 0.0 and remote.step("I cannot cancel it, sorry.")[1] == 1.0
        record = remote.trajectory()
        assert record["forks"][0]["at_step"] == 1 and record["meta"]["user"]["kind"] == "scripted"
        child.close()
    finally:
        remote.close()
