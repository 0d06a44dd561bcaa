"""Rollouts with a real tiny model: batched generation, logprob agreement, the HTTP path."""

from __future__ import annotations

import asyncio

import torch
from train_scripted import ScriptedBackend

from agentrl.agent_train.backends import HFBackend
from agentrl.agent_train.grpo import token_logprobs
from agentrl.agent_train.rollout import RolloutLimits, Rollouts, collect_groups, driver_factory
from agentrl.agent_train.train import build_batch

TOY = "agentrl-test/PickWord-v0"


def test_concurrent_episodes_share_batches_and_logprobs_match_the_trainer(toy_model, toy_tokenizer):
    backend = HFBackend(toy_model, toy_tokenizer, temperature=0.7)
    groups = asyncio.run(
        collect_groups(
            Rollouts(
                driver_factory(TOY), backend, toy_tokenizer, RolloutLimits(max_new_tokens=6, token_budget=128)
            ),
            [0, 1, 2],
            4,
        )
    )
    episodes = [e for g in groups for e in g]
    assert len(groups) == 3 and all(len(g) == 4 for g in groups)
    assert all(e.excluded is None for e in episodes)
    calls = sum(e.turns for e in episodes)
    assert backend.batches < calls  # concurrent requests were batched
    # a group shares its world: same seed, same first observation
    for g in groups:
        assert len({e.transcript.messages[0]["content"] for e in g}) == 1
    # sampling logprobs (left-padded batches, temperature) == the trainer's recomputation (right-padded)
    batch = build_batch(episodes, [0.0] * len(episodes), toy_tokenizer.pad_token_id)
    with torch.no_grad():
        logits = toy_model(input_ids=batch["ids"], attention_mask=batch["attention"]).logits
    recomputed = token_logprobs(logits, batch["ids"], 0.7, backend.suppress_ids)
    m = batch["mask"] > 0
    assert m.sum() == sum(e.transcript.generated_tokens for e in episodes)
    assert torch.allclose(recomputed[m], batch["behav_logp"][m], atol=1e-4)
    assert (batch["mask"][batch["attention"] == 0] == 0).all()


def test_http_rollouts_match_in_process_rollouts(toy_tokenizer):
    from agentrl.server.config import ServerConfig
    from agentrl.server.local import serve_in_thread

    secret_call = '<tool_call>{"name": "echo", "arguments": {"text": "a"}}</tool_call>'
    turns = [secret_call, '<tool_call>{"name": "finish", "arguments": {"answer": "b"}}</tool_call>']
    limits = RolloutLimits(max_new_tokens=256, token_budget=8192)

    def episodes(make_driver):
        backend = ScriptedBackend(toy_tokenizer, turns * 2)
        return asyncio.run(
            collect_groups(Rollouts(make_driver, backend, toy_tokenizer, limits, concurrency=1), [5], 2)
        )[0]

    local = episodes(driver_factory("agentrl/Echo-v0"))
    with serve_in_thread(ServerConfig(env_ids=("agentrl/Echo-v0",))) as url:
        remote = episodes(driver_factory("agentrl/Echo-v0", env_url=url))
    for a, b in zip(local, remote, strict=True):
        assert b.error is None and b.excluded is None
        assert a.transcript.ids == b.transcript.ids and a.transcript.mask == b.transcript.mask
        assert (a.reward, a.turns) == (b.reward, b.turns)
