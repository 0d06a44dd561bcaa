"""`agent-train sft` reads trajectory records: each episode and fork as the exact text exchanged."""

from __future__ import annotations

import copy
import json

import pytest

import agentrl  # noqa: F401  (registers the ids)
from agentrl.agent_train.models import build_tiny_tokenizer
from agentrl.agent_train.sft import SFTConfig, episodes_of, load_episodes
from agentrl.core import tool_call as call
from agentrl.flights.oracle import OraclePolicy
from agentrl.registration import make_env


def play(env, policy, observation, info) -> None:
    done = False
    while not done:
        observation, _r, terminated, truncated, info = env.step(policy(observation, info))
        done = terminated or truncated


@pytest.fixture()
def forked_episode():
    """A stochastic Flights-v0 oracle episode forked after two steps; the fork takes one more oracle
    step, is forked in turn, then gives up, while its own fork finishes the oracle's way."""
    env = make_env("agentrl/Flights-v0", stochastic=True)
    observation, info = env.reset(seed=7, options={"family": "cancel_rebook"})
    oracle = OraclePolicy()
    for _ in range(2):
        observation, _r, _t, _u, info = env.step(oracle(observation, info))
    child, child_oracle = env.fork(1)[0], copy.deepcopy(oracle)
    play(env, oracle, observation, info)
    observation, _r, _t, _u, info = child.step(child_oracle(observation, info))
    grandchild = child.fork(1)[0]
    child.step(call("finish", outcome="infeasible", message="Nothing fits."))
    play(grandchild, child_oracle, observation, info)
    yield env, child, grandchild
    for e in (env, child, grandchild):
        e.close()


def test_a_record_becomes_exactly_the_messages_the_env_kept(forked_episode):
    env, child, grandchild = forked_episode
    record = json.loads(json.dumps(env.trajectory()))
    assert [f["at_step"] for f in record["forks"]] == [2]
    assert [f["at_step"] for f in record["forks"][0]["trajectory"]["forks"]] == [3]
    episodes = episodes_of(record)
    assert [messages for messages, _ in episodes] == [env.messages, child.messages, grandchild.messages]
    assert [gain for _, gain in episodes] == [1.0, 0.0, 1.0]
    assert len(child.messages) == 2 * 4 + 1 and grandchild.messages[:7] == child.messages[:7]


def test_chat_lines_keep_their_reward_and_unknown_formats_are_refused():
    line = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    assert episodes_of(line) == [(line["messages"], None)]
    assert episodes_of({**line, "reward": 0.5})[0][1] == 0.5
    with pytest.raises(ValueError, match="unknown episode format"):
        episodes_of({"format": "agentrl.trajectory/9", "steps": []})


def test_sft_data_mixes_records_and_chat_lines_and_drops_low_returns(forked_episode, tmp_path):
    env, *_ = forked_episode
    record = env.trajectory()
    chat = {"messages": env.messages[:2]}
    data = tmp_path / "mixed.jsonl"
    data.write_text(json.dumps(record) + "\n\n" + json.dumps(chat) + "\n")
    tokenizer = build_tiny_tokenizer([m["content"] for m in env.messages], vocab_size=512)
    logged = []
    cfg = SFTConfig(data=str(data), max_tokens=10**6)
    kept = load_episodes(cfg, tokenizer, log=logged.append)
    assert len(kept) == 3  # the two oracle episodes and the chat line; the fork that gave up is dropped
    assert "'low return': 1" in logged[0] and "'drift': 0" in logged[0]
    assert kept[0].ids == load_episodes(cfg, tokenizer, log=lambda *_: None)[0].ids
    cfg.min_return = 0.0
    assert len(load_episodes(cfg, tokenizer, log=lambda *_: None)) == 4
