"""Search-v0 forks (a copy sharing the retriever) and trajectory records (searches as calls)."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import agentrl  # noqa: F401  (registers the ids)
from agentrl.core import EpisodeOverError
from agentrl.core.trajectory import transcript
from agentrl.search.env import SearchEnv

WORLD = {"world_seed": 7, "world_passages": 600}
ACTIONS = [
    "<think>a</think><search>company founded</search>",
    "<think>b</think>nothing to do",
    "<search>born in</search>",
]


def make(**kwargs) -> SearchEnv:
    return gym.make("agentrl/Search-v0", **{**WORLD, **kwargs}).unwrapped


@pytest.mark.parametrize("k", range(len(ACTIONS) + 1))
def test_a_fork_continues_exactly_as_the_parent(k):
    env = make(max_turns=3)
    env.reset()  # seedless: the question drawn stays the parent's in the fork
    gold = env.question.answers[0]
    rest = [*ACTIONS[k:], f"<answer>{gold}</answer>"]
    for action in ACTIONS[:k]:
        env.step(action)
    (fork,) = env.fork()
    assert fork.retriever is env.retriever and fork.question == env.question
    assert fork.rollout_text == env.rollout_text and fork.messages == env.messages
    ours = [env.step(a) for a in rest]
    assert [fork.step(a) for a in rest] == ours
    assert ours[-1][1] == 1.0 and ours[-1][2] is True
    assert fork.env_spans == env.env_spans and fork.rollout_text == env.rollout_text
    assert fork.trajectory()["steps"] == env.trajectory()["steps"]


def test_forks_are_isolated_and_a_finished_episode_cannot_fork():
    env = make()
    env.reset(seed=4)
    env.step(ACTIONS[0])
    spans, text = list(env.env_spans), env.rollout_text
    searcher, answerer = env.fork(2)
    searcher.step("<search>something else</search>")
    answerer.step("<answer>nobody</answer>")
    assert searcher.searches == 2 and len(searcher.env_spans) == 2
    assert env.env_spans == spans and env.rollout_text == text and env.searches == 1 and env.turn == 1
    with pytest.raises(EpisodeOverError):
        answerer.fork()


def test_record_lists_searches_and_answers_as_calls_and_rebuilds_the_transcript():
    env = make(max_turns=1)
    env.reset(seed=2)
    gold = env.question.answers[0]
    env.step(ACTIONS[0])
    (fork,) = env.fork()
    fork.step(f"<answer>{gold}</answer>")
    env.step("<search>one too many</search>")  # the final turn: no search runs
    record = json.loads(json.dumps(env.trajectory(), allow_nan=False))
    assert record == env.trajectory() and transcript(record) == env.messages
    assert record["env_id"] == "agentrl/Search-v0" and record["seed"] == 2 and record["task_id"]
    assert record["tools"] == []
    first, final = record["steps"]
    (search,) = first["calls"]
    assert search["name"] == "search" and search["arguments"] == {"query": "company founded"}
    assert search["ok"] is True and search["result"] == first["observation"] and "Doc 1" in search["result"]
    assert final["calls"][0]["ok"] is False and final["truncated"] is True
    assert all(s["state_change"] is None for s in record["steps"])
    (branch,) = record["forks"]
    assert branch["at_step"] == 1
    (answer,) = branch["trajectory"]["steps"]
    assert answer["calls"] == [{"name": "answer", "arguments": {"answer": gold}, "ok": True, "result": ""}]
    assert answer["reward"] == 1.0 and answer["terminated"] is True
    env.reset(seed=3)
    env.step(ACTIONS[1])
    assert env.trajectory()["steps"][0]["calls"] == []  # an invalid action calls nothing
