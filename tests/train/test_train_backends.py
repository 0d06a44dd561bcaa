"""Generators: the turn-end token, and vLLM logprobs that must be those of the sampled distribution."""

from __future__ import annotations

import copy
import sys
import types

import pytest

from agentrl.agent_train.backends import HFBackend, never_sampled_ids, turn_end_ids


def test_a_turn_can_end_on_the_template_token_when_eos_is_another(toy_tokenizer, toy_model):
    tok = copy.deepcopy(toy_tokenizer)
    tok.eos_token = "<|pad|>"  # like Qwen: eos <|endoftext|>, turns closed by <|im_end|>
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert set(turn_end_ids(tok)) == {tok.eos_token_id, im_end}
    assert im_end not in never_sampled_ids(tok)
    backend = HFBackend(toy_model, tok)
    assert im_end in backend.stop_ids and im_end not in backend.suppress_ids
    # the toy tokenizer's own eos is <|im_end|>: one turn-end id
    assert turn_end_ids(toy_tokenizer) == [im_end]


class _OldLLM:
    """A vLLM engine from before `logprobs_mode`."""

    def __init__(self, **kwargs):
        if "logprobs_mode" in kwargs:
            raise TypeError("LLM.__init__() got an unexpected keyword argument 'logprobs_mode'")
        self.kwargs = kwargs


@pytest.fixture()
def old_vllm(monkeypatch):
    fake = types.ModuleType("vllm")
    fake.LLM, fake.SamplingParams = _OldLLM, dict
    monkeypatch.setitem(sys.modules, "vllm", fake)


def test_a_vllm_without_processed_logprobs_is_refused_unless_they_equal_raw_ones(old_vllm, toy_tokenizer):
    from agentrl.agent_train.vllm_backend import VLLMBackend

    with pytest.raises(RuntimeError, match="importance ratio"):
        VLLMBackend("model-dir", toy_tokenizer, temperature=0.7)
    with pytest.raises(RuntimeError, match=r"top_p 0\.9"):
        VLLMBackend("model-dir", toy_tokenizer, top_p=0.9)
    # at temperature 1 and top_p 1 raw logprobs are the sampled distribution's: allowed
    backend = VLLMBackend("model-dir", toy_tokenizer, temperature=1.0)
    assert "logprobs_mode" not in backend.llm.kwargs


def _turns(backend, prompts, seeds, replies):
    """Three turns of len(prompts) episodes in one batch each: every next prompt is the previous
    prompt, the sampled ids and an env reply, as the rollout worker builds it."""
    out = []
    for turn, reply in enumerate(replies):
        gens = backend.generate_batch(prompts, [6, 3, 9][: len(prompts)], [s + turn for s in seeds])
        out.append(gens)
        prompts = [p + g.ids + reply for p, g in zip(prompts, gens, strict=True)]
    return out, prompts


def test_the_kv_cache_across_turns_changes_no_token_and_no_logprob(toy_tokenizer, toy_model):
    import torch

    enc = lambda text: toy_tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    first = enc("<|im_start|>user\nsay a word<|im_end|>\n<|im_start|>assistant\n")
    prompts = [first, enc("hi"), enc("the cue")]
    replies = [enc("<|im_end|>\n<|im_start|>user\nagain<|im_end|>\n<|im_start|>assistant\n"), enc(" more")]
    replies.append(enc("x"))
    with torch.no_grad():  # sharp attention, so that a wrong position or mask shows in the logprobs
        for layer in toy_model.model.layers:
            layer.self_attn.q_proj.weight.mul_(8.0)
            layer.self_attn.k_proj.weight.mul_(8.0)
    cached = HFBackend(copy.deepcopy(toy_model), toy_tokenizer)
    plain = HFBackend(copy.deepcopy(toy_model), toy_tokenizer, prefix_cache=0)
    with_cache, last = _turns(cached, prompts, [1, 2, 3], replies)
    without, _ = _turns(plain, prompts, [1, 2, 3], replies)
    assert cached.prefix_cache.hit_tokens > 0 and plain.prefix_cache is None
    for a_turn, b_turn in zip(with_cache, without, strict=True):
        for a, b in zip(a_turn, b_turn, strict=True):
            assert a.ids == b.ids and a.stopped == b.stopped
            assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4, rtol=0)
    # a batch mixing a cached row with a new one, and the cache dropped with new weights
    hits = cached.prefix_cache.hit_tokens
    again = cached.generate_batch([last[0], enc("fresh prompt")], [4, 4], [7, 8])
    assert cached.prefix_cache.hit_tokens > hits
    fresh = plain.generate_batch([last[0], enc("fresh prompt")], [4, 4], [7, 8])
    for a, b in zip(again, fresh, strict=True):
        assert a.ids == b.ids
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4, rtol=0)
    assert len(cached.prefix_cache) > 0
    cached.update_weights(cached.model.state_dict(), 1)
    assert len(cached.prefix_cache) == 0


def test_a_group_s_shared_prompt_is_encoded_once_and_samples_as_before(toy_tokenizer, toy_model):
    """A GRPO group's first turn: one prompt, G rows. The prompt's prefill runs for one row, every
    row then encodes only its last id; tokens and logprobs equal those of a backend with no cache."""
    import torch

    enc = lambda text: toy_tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    task = enc("<|im_start|>user\nbook the cheapest flight to Oslo<|im_end|>\n<|im_start|>assistant\n")
    other = enc("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    prompts = [task] * 4 + [other] * 2 + [enc("alone")]
    cached = HFBackend(copy.deepcopy(toy_model), toy_tokenizer)
    plain = HFBackend(copy.deepcopy(toy_model), toy_tokenizer, prefix_cache=0)
    encoded: list[int] = []  # real (unpadded) prompt ids each forward pass is given, first pass per call
    forward = cached.model.forward

    def counting(*args, **kwargs):
        encoded.append(int(kwargs["attention_mask"][:, -kwargs["input_ids"].shape[1]:].sum()))
        return forward(*args, **kwargs)

    cached.model.forward = counting
    seeds = list(range(len(prompts)))
    ours = cached.generate_batch(prompts, [5] * len(prompts), seeds)
    theirs = plain.generate_batch(prompts, [5] * len(prompts), seeds)
    for a, b in zip(ours, theirs, strict=True):
        assert a.ids == b.ids
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4, rtol=0)
    # the shared pass encodes each repeated prompt once, less its last id; the batch's first pass
    # then encodes one id per grouped row and the lone prompt whole
    assert encoded[0] == (len(task) - 1) + (len(other) - 1)
    assert encoded[1] == 6 + len(prompts[-1])
    assert cached.prefix_cache.hit_tokens == 4 * (len(task) - 1) + 2 * (len(other) - 1)
    # a prompt that shares only a start with a stored sequence (same opening, another ending) takes
    # that start from the cache; its samples still equal the uncached backend's
    hits = cached.prefix_cache.hit_tokens
    branch = task[:-3] + enc(" the earliest flight to Bergen")
    ours = cached.generate_batch([branch], [5], [11])
    theirs = plain.generate_batch([branch], [5], [11])
    assert cached.prefix_cache.hit_tokens - hits == len(task) - 3
    assert ours[0].ids == theirs[0].ids
    assert torch.allclose(torch.tensor(ours[0].logprobs), torch.tensor(theirs[0].logprobs), atol=1e-4, rtol=0)


def test_the_generator_batches_every_episode_in_flight(toy_tokenizer, toy_model):
    """One wave of `concurrency` episodes is one batch, and the prefix cache holds a row for each:
    a cap below it would run a wave as batches one after another, at the same cost per decode step
    on a GPU."""
    from agentrl.agent_train.config import TrainConfig
    from agentrl.agent_train.train import make_backend

    for concurrency, rows in ((8, 128), (200, 200)):
        cfg = TrainConfig(env="agentrl-test/PickWord-v0", model="tiny:1x32", concurrency=concurrency)
        backend = make_backend(cfg, toy_model, toy_tokenizer, "cpu")
        assert backend.max_batch == concurrency
        assert backend.prefix_cache is not None and backend.prefix_cache.max_entries == rows
