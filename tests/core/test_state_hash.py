"""`info["state_hash"]`: equal for the same state however it was reached, different otherwise,
the same across two episodes of one task, and passed through by the server.

Echo-v0, Flights-v0 (every granularity), Search-v0 and TauAirline-v0 here; Bash-v0 / Code-v0 with
the Docker engine in tests/code_envs/test_code_envs_state_hash.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import agentrl  # noqa: F401  (registers the ids)
from agentrl.core import tool_call as call
from agentrl.core.state_hash import canonical, state_hash

sys.path.insert(0, str(Path(__file__).parents[1] / "tau_airline"))


def hashes(env, seed: int, actions: list[str], **reset) -> list[str]:
    _, info = env.reset(seed=seed, **reset)
    out = [info["state_hash"]]
    for action in actions:
        *_, info = env.step(action)
        out.append(info["state_hash"])
    return out


def test_the_hash_is_order_free_for_sets_and_refuses_what_it_cannot_name():
    assert state_hash({"a": {1, 2}, "b": [1]}) == state_hash({"b": [1], "a": {2, 1}})
    assert state_hash({"a": [1, 2]}) != state_hash({"a": [2, 1]})
    assert len(state_hash(None)) == 32 and canonical({"x": b"\x01"}) == '{"x":"01"}'
    with pytest.raises(TypeError, match="plain data"):
        state_hash(object())


def test_echo_same_state_by_two_orders_and_across_episodes():
    env = gym.make("agentrl/Echo-v0").unwrapped
    a, b = call("echo", text="a"), call("echo", text="b")
    ab, ba = hashes(env, 3, [a, b]), hashes(env, 3, [b, a])
    assert ab[0] == ba[0] and ab[2] == ba[2]  # same task; {a, b} shown either way
    assert ab[1] != ba[1]  # {a} is not {b}
    assert hashes(env, 3, [a, a])[1:] == [ab[1], ab[1]]  # a repeated result is no new fact
    assert hashes(env, 3, ["no call"])[1] == ab[0]  # a malformed action shows nothing new
    other = next(s for s in range(20) if env.reset(seed=s)[1]["secret"] != env.reset(seed=3)[1]["secret"])
    assert hashes(env, other, [])[0] != ab[0]  # another task


@pytest.mark.parametrize("granularity", ["coarse", "default", "fine"])
def test_flights_searches_in_either_order_reach_one_state_and_a_booking_changes_it(granularity):
    env = gym.make("agentrl/Flights-v0", granularity=granularity, families=["cheapest"]).unwrapped
    try:
        env.reset(seed=5)
        origin, destination, day = env.task.route
        there = call("search_flights", origin=origin, destination=destination, date=day)
        back = call("search_flights", origin=destination, destination=origin, date=day)
        ab = hashes(env, 5, [there, back])
        ba = hashes(env, 5, [back, there])
        # the last search differs (filter and pages read it); searching `back` again evens that out
        assert hashes(env, 5, [there, back, back])[-1] == hashes(env, 5, [back, there, back])[-1]
        assert ab[1] != ba[1] and ab[0] == ba[0]
        assert len(set(ab)) == 3
        # across two episodes of one task (a fresh env too), the same state, the same hash
        again = gym.make("agentrl/Flights-v0", granularity=granularity, families=["cheapest"]).unwrapped
        assert hashes(again, 5, [there, back]) == ab
        again.close()
        # a write changes the state: the database rows
        passenger = env.task.request["passengers"][0]
        flight = env.world.route_flights(origin, destination, day)[0]
        env.reset(seed=5)
        before = env.step(call("get_passenger", passenger_id=passenger))[4]["state_hash"]
        shown = env.messages[-1]["content"].split("<tool_response>")[1].split("</tool_response>")[0]
        method = json.loads(shown)["content"]["payment_methods"][0]["id"]
        if granularity != "fine":
            book = (
                call(
                    "book_flight",
                    flight_id=flight,
                    cabin="economy",
                    passenger_ids=[passenger],
                    payment_method_id=method,
                )
                if granularity == "default"
                else call(
                    "book_best",
                    origin=origin,
                    destination=destination,
                    date=day,
                    passenger_ids=[passenger],
                    payment_method_id=method,
                )
            )
            info = env.step(book)[4]
            rows = env._world_state()["rows"]
            assert info["state_hash"] != before and rows and all("pnr" not in r for r in rows)
    finally:
        env.close()


def test_flights_hash_names_no_answer():
    env = gym.make("agentrl/Flights-v0", privileged_info=True).unwrapped
    _, info = env.reset(seed=2)
    text = canonical(env._state())
    for value in info["task"].values():
        if isinstance(value, str) and len(value) > 3 and value not in env.messages[0]["content"]:
            assert value not in text
    env.close()


def test_search_same_passages_in_either_order():
    env = gym.make("agentrl/Search-v0", world_seed=7, world_passages=600).unwrapped
    q1, q2 = "<search>company founded</search>", "<search>river city</search>"
    ab, ba = hashes(env, 4, [q1, q2]), hashes(env, 4, [q2, q1])
    assert ab[0] == ba[0] and ab[2] == ba[2] and ab[1] != ba[1]
    assert hashes(env, 4, [q1, q1])[2] == ab[1]  # the same passages again: the same state
    question = env.reset(seed=4)[1]["question"]
    other = next(s for s in range(5, 40) if env.reset(seed=s)[1]["question"] != question)
    assert hashes(env, other, [])[0] != ab[0]
    # the answer is not in what is hashed
    assert env.question.answers[0] not in canonical(env._state())


def test_tau_airline_state_follows_what_was_said_and_changed():
    from tau_helpers import DATA

    from agentrl.tau_airline.env import TauAirlineEnv

    env = TauAirlineEnv(DATA)
    try:
        a = call("get_user_details", user_id="ada_park_101")
        b = call("list_all_airports")
        ab = hashes(env, 0, [a, b], options={"task_index": 0})
        ba = hashes(env, 0, [b, a], options={"task_index": 0})
        assert ab[0] == ba[0] and ab[2] == ba[2] and ab[1] != ba[1]
        said = hashes(env, 0, [a, b, "Hello, how can I help?"], options={"task_index": 0})
        assert said[:3] == ab and said[3] != ab[2]
        # the same message answered otherwise by the customer is another state; answered alike, the same
        asked = ["What is your user id?", a]
        one = hashes(env, 0, asked, options={"task_index": 0, "user_turns": ["hi", "ada_park_101"]})
        other = hashes(env, 0, asked, options={"task_index": 0, "user_turns": ["hi", "I forgot it"]})
        again = hashes(env, 0, asked, options={"task_index": 0, "user_turns": ["hi", "ada_park_101"]})
        assert one[0] == other[0] and one[1] != other[1] and one[2] != other[2] and one == again
    finally:
        env.close()


def test_the_server_passes_the_hash_through():
    from agentrl.client import EnvClient
    from agentrl.server.config import ServerConfig
    from agentrl.server.local import serve_in_thread

    env = gym.make("agentrl/Echo-v0").unwrapped
    local = hashes(env, 3, [call("echo", text="a")])
    with serve_in_thread(ServerConfig(max_episodes=8)) as url, EnvClient(url) as client:
        created = client.create_episode("agentrl/Echo-v0", seed=3)
        step = client.step(created.episode_id, call("echo", text="a"))
        assert [created.info["state_hash"], step.info["state_hash"]] == local
        client.close_episode(created.episode_id)
