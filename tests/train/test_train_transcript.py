"""Token-in/token-out transcripts: exact reproduction under SmolLM2's chat template, masks, drift."""

from __future__ import annotations

import asyncio
import copy

import gymnasium as gym
import pytest
import torch
from train_scripted import ScriptedBackend

import agentrl  # noqa: F401
from agentrl.agent_train.grpo import group_advantages
from agentrl.agent_train.rollout import RolloutLimits, Rollouts, driver_factory, run_episode
from agentrl.agent_train.train import select_samples
from agentrl.agent_train.transcript import Transcript, encode, render
from agentrl.core import tool_call as call

ECHO = "agentrl/Echo-v0"


def secret_of(seed: int) -> str:
    env = gym.make(ECHO)
    _, info = env.reset(seed=seed)
    env.close()
    return info["secret"]


def run(tokenizer, turns, seed=3, env=ECHO, limits=None):
    backend = ScriptedBackend(tokenizer, turns)
    episode = asyncio.run(
        run_episode(Rollouts(driver_factory(env), backend, tokenizer, limits or RolloutLimits()), seed)
    )
    return episode, backend


def test_multi_turn_transcript_reproduces_the_chat_template_token_for_token(smollm2_tokenizer):
    tok = smollm2_tokenizer
    turns = [call("echo", text="hello there"), "Let me think.\n" + call("finish", answer=secret_of(3))]
    episode, backend = run(tok, turns)
    t = episode.transcript
    assert episode.excluded is None and episode.reward == 1.0 and episode.turns == 2
    # The whole conversation, re-rendered by the template and tokenized once, equals the ids the
    # model saw and produced, up to the template's newline after the final <|im_end|>.
    canonical = encode(tok, render(tok, t.messages, add_generation_prompt=False))
    assert canonical[: len(t.ids)] == t.ids
    assert tok.decode(canonical[len(t.ids) :]) == "\n"
    assert t.retokenization_mismatch() == 0
    # mask: 1 exactly on the sampled ids, with their sampling logprobs; 0 and 0.0 everywhere else
    sampled = [i for ids in backend.sampled for i in ids]
    assert [i for i, m in zip(t.ids, t.mask, strict=True) if m] == sampled
    assert sum(t.mask) == len(sampled) < len(t.ids)
    assert all(lp == 0.0 for lp, m in zip(t.logprobs, t.mask, strict=True) if not m)
    assert [lp for lp, m in zip(t.logprobs, t.mask, strict=True) if m][:2] == [-0.5, -0.51]
    # the env's text is in the transcript and never under the mask
    env_text = tok.decode([i for i, m in zip(t.ids, t.mask, strict=True) if not m])
    assert "<tool_response>" in env_text and "hello there" in env_text
    assert t.versions.count(-1) == len(t.ids) - len(sampled)


def test_sampled_ids_are_kept_even_when_not_the_canonical_tokenization(smollm2_tokenizer):
    tok = smollm2_tokenizer
    text = call("finish", answer="nope")
    spelled = [i for ch in text for i in encode(tok, ch)] + [tok.eos_token_id]  # one id per character
    assert spelled[:-1] != encode(tok, text)
    episode, backend = run(tok, [spelled])
    t = episode.transcript
    assert episode.excluded is None  # same text: the transcript is consistent...
    assert [
        i for i, m in zip(t.ids, t.mask, strict=True) if m
    ] == spelled  # ...and trains on what was sampled
    assert t.retokenization_mismatch() > 0  # re-tokenizing would have trained on other ids


def test_template_drift_is_detected_and_not_trained_on(smollm2_tokenizer):
    tok = copy.deepcopy(smollm2_tokenizer)
    tok.chat_template = tok.chat_template.replace("message['content']", "(message['content'] | trim)")
    drifted, _ = run(tok, ["   " + call("echo", text="x"), call("finish", answer="y")])
    assert drifted.transcript.drift is not None and "drift" in drifted.excluded
    assert drifted.turns == 1  # stopped at the drift instead of building on it
    clean, _ = run(tok, [call("echo", text="x"), call("finish", answer=secret_of(3))])
    assert clean.excluded is None
    groups = [[drifted, clean]]
    adv, keep = group_advantages(torch.tensor([[drifted.reward, clean.reward]]), "std")
    chosen, _, _ = select_samples(groups, adv, keep, version=0, max_staleness=1)
    assert chosen == [clean]


def test_budget_truncation_and_prefix_check_on_an_open_turn(toy_tokenizer):
    episode, _ = run(
        toy_tokenizer,
        ["purple", "purple"],
        env="agentrl-test/PickWord-v0",
        limits=RolloutLimits(max_new_tokens=8, token_budget=30),
    )
    t = episode.transcript
    assert episode.truncated_by_budget and episode.excluded is None
    assert t.decoded().endswith("<|im_start|>assistant\n") and t.check()


def test_transcript_start_ends_with_the_generation_prompt(smollm2_tokenizer):
    t = Transcript(smollm2_tokenizer)
    t.start([{"role": "user", "content": "hi"}])
    assert t.decoded().endswith("<|im_start|>assistant\n") and sum(t.mask) == 0
    with pytest.raises(ValueError):
        t.add_generation([1, 2], [0.0], 0)


def test_samples_beyond_the_staleness_bound_are_dropped(toy_tokenizer):
    fresh, _ = run(toy_tokenizer, ["red", "red"], env="agentrl-test/PickWord-v0")
    old = copy.deepcopy(fresh)
    old.transcript.versions = [
        v - 3 if m else v for v, m in zip(old.transcript.versions, old.transcript.mask, strict=True)
    ]
    adv, keep = group_advantages(torch.tensor([[1.0, 0.0]]), "std")
    chosen, _, stale = select_samples([[fresh, old]], adv, keep, version=2, max_staleness=2)
    assert chosen == [fresh] and stale == 1
