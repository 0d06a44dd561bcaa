"""Keys and values kept between the turns of an episode, so a turn encodes only its new tokens.

An episode's next prompt is its previous prompt, the ids it sampled and the env's reply, all as
ids (token-in/token-out), so the attention keys and values of everything before the reply are
already known when the next turn starts. `PrefixCache` keeps them per sequence, keyed by the ids
they were computed from: a prompt reuses the entry it shares the longest start with (vLLM's
automatic prefix caching, by exact token match, at token rather than block granularity).
`batch_cache` lines several rows' entries up into one cache, left-padded, and `split_rows` cuts a
batch's cache back into rows once it has generated. Nothing here changes what a model computes
for a token: a cached key is the one the same forward pass would produce again, up to float
rounding.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

Layers = list[tuple[Any, Any]]  # per layer: keys and values, each [1, kv_heads, length, head_dim]


@dataclass
class CacheEntry:
    ids: list[int]
    layers: Layers


class PrefixCache:
    """Per-sequence caches, least recently used first out beyond `max_entries`.

    Storing a sequence drops the entries it extends (the previous turn of the same episode), so an
    episode holds one entry at a time; a finished episode's entry goes with `release` (else it ages
    out). `release` comes from the rollouts' thread while a batch generates on another: the
    entries' table is changed under a lock."""

    def __init__(self, max_entries: int = 128) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[int, CacheEntry] = OrderedDict()
        self._lock = threading.Lock()
        self._next = 0
        self.hit_tokens = 0  # prompt tokens taken from the cache instead of encoded again

    def __len__(self) -> int:
        return len(self._entries)

    def _longest(self, prompt: list[int]) -> tuple[int, CacheEntry | None, int]:
        """The entry sharing the longest run of first ids with `prompt`, and that run's length.
        An entry need not be a prefix of the prompt: keys of its first k positions depend on its
        first k ids only, so any common start is reusable (the policy text every task opens with,
        a group's prompt after one row's answer)."""
        best_key, best, best_n = -1, None, 0  # the key is read only once `best` is set
        for key, entry in self._entries.items():
            n = _common_start(entry.ids, prompt)
            if n > best_n:
                best_key, best, best_n = key, entry, n
        return best_key, best, best_n

    def covered(self, prompt: list[int]) -> int:
        """How many of `prompt`'s first ids an entry holds (no hit counted, no order changed)."""
        with self._lock:
            return self._longest(prompt)[2]

    def lookup(self, prompt: list[int]) -> CacheEntry | None:
        """The entry sharing the longest start with `prompt`, cut to that start and so that at
        least one prompt id is left to encode (the next token's logits come from it)."""
        with self._lock:
            best_key, best, common = self._longest(prompt)
            if best is None:
                return None
            self._entries.move_to_end(best_key)
        use = min(common, len(prompt) - 1)
        if use <= 0:
            return None
        self.hit_tokens += use
        if use == len(best.ids):
            return best
        return CacheEntry(best.ids[:use], [(k[:, :, :use], v[:, :, :use]) for k, v in best.layers])

    def store(self, entry: CacheEntry) -> None:
        with self._lock:
            self._take([entry.ids])
            self._entries[self._next] = entry
            self._next += 1
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def take_extended(self, prompts: list[list[int]]) -> list[CacheEntry]:
        """Remove and return the entries that some of `prompts` extends. Storing those prompts'
        sequences after they generate would drop them anyway (`store`); taking them before lets
        the batch's cache be built from them while their memory goes (`batch_cache`'s `consumed`),
        so that an episode's keys and values are not held twice during its next turn."""
        with self._lock:
            return self._take(prompts)

    def release(self, ids: list[int]) -> None:
        """Drop the entries `ids` extends: the episode whose transcript `ids` is has ended, and no
        turn of it will extend them (a finished episode's keys would otherwise stay, a whole
        transcript's worth, beside the next episodes')."""
        with self._lock:
            self._take([ids])

    def _take(self, sequences: list[list[int]]) -> list[CacheEntry]:
        keys = [k for k, e in self._entries.items() if any(s[: len(e.ids)] == e.ids for s in sequences)]
        return [self._entries.pop(k) for k in keys]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def _common_start(a: list[int], b: list[int]) -> int:
    """How many first ids `a` and `b` share: list slices compare in C, so a bisection over
    slice equality beats a Python loop over thousands of ids."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    low, high = 0, n  # a[:low] == b[:low] and a[:high] != b[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle
    return low


def batch_cache(
    entries: list[CacheEntry | None], width: int, consumed: list[CacheEntry] | None = None
) -> Any:
    """One DynamicCache of `width` positions: row i's entry right-aligned, zeros before it (the
    caller masks them out). None when no row has an entry.

    The `consumed` entries (out of the prefix cache, `PrefixCache.take_extended`) let go of each
    layer once it is copied: a batch's keys and values and its rows' entries are then never both
    whole in memory, one layer at most."""
    from transformers import DynamicCache

    first = next((e for e in entries if e is not None), None)
    if first is None or width == 0:
        return None
    cache = DynamicCache()
    for layer in range(len(first.layers)):
        k0, v0 = first.layers[layer]
        keys = k0.new_zeros((len(entries), k0.shape[1], width, k0.shape[3]))
        values = v0.new_zeros((len(entries), v0.shape[1], width, v0.shape[3]))
        for i, entry in enumerate(entries):
            if entry is not None:
                k, v = entry.layers[layer]
                keys[i, :, width - k.shape[2] :] = k[0]
                values[i, :, width - v.shape[2] :] = v[0]
        cache.update(keys, values, layer)
        for entry in consumed or []:
            entry.layers[layer] = (None, None)
    return cache


def split_rows(cache: Any, tokens: Any, real: Any) -> list[CacheEntry]:
    """Row i's entry: the positions where `real[i]` is set, with their ids from `tokens[i]`
    (`real` and `tokens` may sit on another device than the cache, as on a GPU).

    Consumes `cache`: each layer is let go once its rows are cut out of it, so that the batch's
    cache and its rows' copies are never both whole in memory, one layer at most."""
    n = real.shape[0]
    idx = [real[i].nonzero().squeeze(1) for i in range(n)]
    at = [i.to(cache.layers[0].keys.device) for i in idx] if cache.layers else idx
    layers: list[Layers] = [[] for _ in range(n)]
    while cache.layers:
        layer = cache.layers.pop(0)
        for i in range(n):
            layers[i].append((layer.keys[i : i + 1].index_select(2, at[i]),
                              layer.values[i : i + 1].index_select(2, at[i])))
        del layer
    return [CacheEntry(tokens[i, idx[i]].tolist(), layers[i]) for i in range(n)]
