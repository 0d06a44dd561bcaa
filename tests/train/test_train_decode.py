"""The static-shape decode loop samples exactly what the growing-cache loop samples.

`HFBackend(decode="static")` writes each batch's keys and values into buffers of the batch's final
width and keeps every step's shapes the same; "compiled" runs that step through `torch.compile`;
"dynamic" is the growing `DynamicCache`. Same prompts, same seeds: same tokens, same logprobs, over
several turns (the prefix cache in play), batches of one row and of several, prompts of different
lengths, sampled and greedy (a temperature so low that sampling is the argmax).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from test_train_backends import _turns
from test_train_update import tiny_gemma2

from agentrl.agent_train.backends import HFBackend


@pytest.fixture()
def sharp_model(toy_model):
    """Sharp attention, so that a wrong position or mask shows in the logprobs."""
    with torch.no_grad():
        for layer in toy_model.model.layers:
            layer.self_attn.q_proj.weight.mul_(8.0)
            layer.self_attn.k_proj.weight.mul_(8.0)
    return toy_model


def episodes(tokenizer: Any) -> tuple[list[list[int]], list[list[int]]]:
    enc = lambda text: tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    prompts = [enc("<|im_start|>user\nsay a word<|im_end|>\n<|im_start|>assistant\n"), enc("hi"),
               enc("the cue")]
    replies = [enc("<|im_end|>\n<|im_start|>user\nagain<|im_end|>\n<|im_start|>assistant\n"), enc(" more"),
               enc("x")]
    return prompts, replies


def shapes_of_steps(backend: HFBackend) -> list[tuple[Any, ...]]:
    """Records, for each forward pass of the model: ids, mask and cache type."""
    seen: list[tuple[Any, ...]] = []
    forward = backend.model.forward

    def recording(*args: Any, **kwargs: Any) -> Any:
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        ids, mask = kwargs["input_ids"], kwargs["attention_mask"]
        seen.append((tuple(ids.shape), tuple(mask.shape), type(cache).__name__))
        return forward(*args, **kwargs)

    backend.model.forward = recording
    return seen


@pytest.mark.parametrize("temperature", [1.0, 0.01])
@pytest.mark.parametrize("rows", [1, 3])
def test_static_decode_samples_the_growing_cache_s_tokens(toy_tokenizer, sharp_model, rows, temperature):
    prompts, replies = episodes(toy_tokenizer)
    grown = HFBackend(copy.deepcopy(sharp_model), toy_tokenizer, decode="dynamic", temperature=temperature)
    static = HFBackend(copy.deepcopy(sharp_model), toy_tokenizer, decode="static", temperature=temperature)
    seen = shapes_of_steps(static)
    expected, _ = _turns(grown, prompts[-rows:], [1, 2, 3][:rows], replies)
    got, _ = _turns(static, prompts[-rows:], [1, 2, 3][:rows], replies)
    assert static.prefix_cache.hit_tokens == grown.prefix_cache.hit_tokens > 0
    for a_turn, b_turn in zip(expected, got, strict=True):
        for a, b in zip(a_turn, b_turn, strict=True):
            assert a.ids == b.ids and a.stopped == b.stopped
            assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-5, rtol=0)
    # the steps after a batch's first pass all run on one static cache with one mask shape
    steps = [s for s in seen if s[2] == "StaticCache"]
    assert steps and all(s[0] == (rows, 1) for s in steps)
    assert len({s[1] for s in steps}) <= len(replies)  # one width per batch (a batch per turn)


def test_the_compiled_step_samples_the_same_tokens(toy_tokenizer, sharp_model, monkeypatch):
    """The step goes through torch.compile's graph capture (dynamo); here with its eager backend,
    as code generation for a CPU takes minutes: what is checked is that the step traces and that
    the captured loop samples as the growing cache does."""
    compile_ = torch.compile
    compiled: list[Any] = []

    def capture_only(fn: Any, mode: str | None = None) -> Any:
        compiled.append(mode)
        return compile_(fn, backend="eager")

    monkeypatch.setattr(torch, "compile", capture_only)
    prompts, replies = episodes(toy_tokenizer)
    grown = HFBackend(copy.deepcopy(sharp_model), toy_tokenizer, decode="dynamic")
    traced = HFBackend(copy.deepcopy(sharp_model), toy_tokenizer, decode="compiled")
    assert compiled == [None]  # CUDA graphs ("reduce-overhead") on a GPU only
    from torch._dynamo.utils import counters

    expected, _ = _turns(grown, prompts, [4, 5, 6], replies[:2])
    graphs = counters["stats"]["unique_graphs"]
    got, _ = _turns(traced, prompts, [4, 5, 6], replies[:2])
    for a_turn, b_turn in zip(expected, got, strict=True):
        assert [g.ids for g in a_turn] == [g.ids for g in b_turn]
    # every batch here rounds to one width: one graph, whatever cache object each batch brings
    assert counters["stats"]["unique_graphs"] == graphs + 1


def test_an_unknown_decode_mode_and_a_static_sliding_window_are_refused(toy_tokenizer, toy_model):
    with pytest.raises(ValueError, match="decode must be one of"):
        HFBackend(toy_model, toy_tokenizer, decode="fast")
    # a static sliding-window layer keeps its last window only: the prefix cache needs every position
    sliding = tiny_gemma2()
    with pytest.raises(ValueError, match="sliding-window layers"):
        HFBackend(sliding, toy_tokenizer)
    assert HFBackend(sliding, toy_tokenizer, decode="dynamic").decode == "dynamic"
