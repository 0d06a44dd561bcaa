"""`env.trajectory()`: the episode as an `agentrl.trajectory/1` record, through Echo-v0."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import agentrl  # noqa: F401  (registers the ids)
from agentrl.core import tool_call as call
from agentrl.core.trajectory import TRAJECTORY_FORMAT, transcript
from agentrl.echo import EchoEnv


def roundtrip(record: dict) -> dict:
    return json.loads(json.dumps(record, allow_nan=False))


def test_record_holds_calls_results_and_rebuilds_the_transcript():
    env = gym.make("agentrl/Echo-v0").unwrapped
    observation, _ = env.reset(seed=4)
    actions = [
        call("echo", text="héllo") + call("nope", x=1),
        "no call here",
        "<tool_call>{not json</tool_call>",
        12345,  # not text: recorded as the transcript shows it
        call("echo", text=7),  # invalid arguments
        call("finish", answer=env._secret),
    ]
    for action in actions:
        env.step(action)
    record = roundtrip(env.trajectory())
    assert record == env.trajectory()  # JSON through and back, unchanged
    assert record["format"] == TRAJECTORY_FORMAT and record["env_id"] == "agentrl/Echo-v0"
    assert record["seed"] == 4 and record["task_id"] is None and record["observation"] == observation
    assert [t["function"]["name"] for t in record["tools"]] == ["echo", "finish"]
    assert transcript(record) == env.messages
    steps = record["steps"]
    assert len(steps) == len(actions) and record["forks"] == []
    echo, unknown = steps[0]["calls"]
    assert echo == {
        "name": "echo",
        "arguments": {"text": "héllo"},
        "ok": True,
        "result": '<tool_response>\n{"name": "echo", "content": "héllo"}\n</tool_response>',
    }
    assert unknown["name"] == "nope" and unknown["arguments"] == {"x": 1} and not unknown["ok"]
    assert "unknown tool" in unknown["result"]
    assert steps[0]["observation"] == echo["result"] + "\n" + unknown["result"]
    assert steps[1]["calls"] == [] and "No tool call found" in steps[1]["observation"]
    assert [(c["name"], c["arguments"], c["ok"]) for c in steps[2]["calls"]] == [(None, None, False)]
    assert steps[3]["action"] == "12345" and steps[3]["calls"] == []
    assert steps[4]["calls"][0]["ok"] is False and "invalid arguments" in steps[4]["calls"][0]["result"]
    assert [s["reward"] for s in steps] == [0.0] * 5 + [1.0]
    assert [s["terminated"] for s in steps] == [False] * 5 + [True]
    assert all(s["state_change"] is None and s["truncated"] is False for s in steps)


def test_truncation_is_recorded():
    env = EchoEnv(max_turns=2)
    env.reset(seed=0)
    env.step(call("echo", text="a"))
    env.step(call("echo", text="b"))
    steps = env.trajectory()["steps"]
    assert [s["truncated"] for s in steps] == [False, True]
    assert transcript(env.trajectory()) == env.messages


def test_forks_are_children_holding_only_their_own_steps():
    env = EchoEnv()
    env.reset(seed=2)
    env.step(call("echo", text="shared"))
    (left,) = env.fork()
    right, _unused = env.fork(2)
    left.step(call("echo", text="left"))
    (deeper,) = left.fork()
    deeper.step(call("finish", answer="deep"))
    right.step(call("finish", answer="right"))
    env.step(call("finish", answer="parent"))
    record = roundtrip(env.trajectory())
    actions = [s["action"] for s in record["steps"]]
    assert actions == [call("echo", text="shared"), call("finish", answer="parent")]
    assert [f["at_step"] for f in record["forks"]] == [1, 1, 1]
    left_rec, right_rec, unused_rec = (f["trajectory"] for f in record["forks"])
    assert [s["action"] for s in left_rec["steps"]] == [call("echo", text="left")]
    assert [s["action"] for s in right_rec["steps"]] == [call("finish", answer="right")]
    assert unused_rec["steps"] == []
    assert left_rec["forks"][0]["at_step"] == 2  # counted from the episode's start
    deeper_steps = left_rec["forks"][0]["trajectory"]["steps"]
    assert [s["action"] for s in deeper_steps] == [call("finish", answer="deep")]
    # a fork's own record is whole: the shared steps, then its own, and it rebuilds its transcript
    assert transcript(left.trajectory()) == left.messages
    assert transcript(deeper.trajectory()) == deeper.messages
    prefix = record["steps"][:1]
    assert transcript({**record, "steps": prefix + right_rec["steps"]}) == right.messages


def test_no_record_before_reset():
    with pytest.raises(RuntimeError, match="reset"):
        EchoEnv().trajectory()
