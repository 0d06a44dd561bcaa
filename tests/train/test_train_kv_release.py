"""A turn holds each episode's keys and values once, and a finished episode's leave the generator.

The prefix cache keeps a whole transcript's keys and values per episode in flight (46 KB a token
for SmolLM2-135M: about 2 GB for 16 episodes of 2,700 tokens), so each extra copy of them is a
step's worth of memory: the batch's cache built from the entries beside the entries themselves,
the grown prompt-pass cache beside the static one, the rows cut out of the batch's cache beside
it, a finished episode's entry beside the next step's. What sampling gives is checked against the
uncached and the growing-cache loops in test_train_backends.py and test_train_decode.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from test_train_decode import episodes

from agentrl.agent_train.backends import HFBackend
from agentrl.agent_train.rollout import RolloutLimits, Rollouts, collect_groups, driver_factory

TOY = "agentrl-test/PickWord-v0"


def entry_ids(backend: HFBackend) -> list[list[int]]:
    assert backend.prefix_cache is not None
    return [e.ids for e in backend.prefix_cache._entries.values()]


def watch_passes(backend: HFBackend) -> list[dict[str, Any]]:
    """At each forward pass of the model: the cache it is given, its live layers, the ids of
    every prefix-cache entry, and how many positions' logits it returned."""
    seen: list[dict[str, Any]] = []
    forward = backend.model.forward

    def recording(*args: Any, **kwargs: Any) -> Any:
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        seen.append({"cache": cache, "layers": len(cache.layers) if cache is not None else 0,
                     "entries": entry_ids(backend)})
        out = forward(*args, **kwargs)
        seen[-1]["logits"] = out.logits.shape[1]
        return out

    backend.model.forward = recording
    return seen


@pytest.mark.parametrize("decode", ["static", "dynamic"])
def test_a_turn_holds_each_episode_s_keys_and_values_once(toy_tokenizer, toy_model, decode):
    backend = HFBackend(toy_model, toy_tokenizer, decode=decode)
    seen = watch_passes(backend)
    prompts, replies = episodes(toy_tokenizer)
    gens = backend.generate_batch(prompts, [6, 3, 9], [1, 2, 3])
    assert backend.prefix_cache is not None and len(backend.prefix_cache) == 3
    caches = {id(s["cache"]): s["cache"] for s in seen if s["cache"] is not None}
    assert caches and all(not c.layers for c in caches.values())  # cut into rows and let go
    seen.clear()
    nexts = [p + g.ids + r for p, g, r in zip(prompts, gens, replies, strict=True)]
    backend.generate_batch(nexts, [6, 3, 9], [4, 5, 6])
    # the batch's cache was built from the previous turn's entries, which left the prefix cache
    # (and let go of their layers) before the first pass: none of them beside the batch's cache
    first = seen[0]
    assert first["layers"] == len(toy_model.model.layers)
    assert not [ids for ids in first["entries"] if any(n[: len(ids)] == ids for n in nexts)]
    if decode == "static":  # the grown prompt-pass cache is empty once copied into the static one
        assert seen[1]["cache"] is not first["cache"] and not first["cache"].layers
    # no pass computes vocabulary-wide logits beyond the last position (a prompt's would be
    # thousands of rows of them)
    assert {s["logits"] for s in seen} == {1}
    # after the turn, one entry per episode again, each the whole new transcript so far
    assert len(backend.prefix_cache) == 3
    assert all(any(n == ids[: len(n)] for n in nexts) for ids in entry_ids(backend))


def test_a_finished_episode_s_keys_and_values_leave_the_prefix_cache(toy_tokenizer, toy_model):
    """With rollouts a step ahead, the next step's episodes run while the last step's entries
    would wait for new weights to clear them: each is dropped as its episode ends."""
    backend = HFBackend(toy_model, toy_tokenizer)
    assert backend.prefix_cache is not None
    stored = backend.prefix_cache.store
    sizes: list[int] = []

    def counting(entry: Any) -> None:
        stored(entry)
        sizes.append(len(backend.prefix_cache or []))

    backend.prefix_cache.store = counting
    limits = RolloutLimits(max_new_tokens=4, token_budget=128)
    spec = Rollouts(driver_factory(TOY), backend, toy_tokenizer, limits)
    groups = asyncio.run(collect_groups(spec, [0, 1], 3))
    assert all(e.error is None for g in groups for e in g)
    assert max(sizes) >= 2  # episodes in flight kept their entries between turns
    assert len(backend.prefix_cache) == 0  # and no finished episode's stayed
