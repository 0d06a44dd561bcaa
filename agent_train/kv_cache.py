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
    episode holds one entry at a time; the entries of finished episodes age out."""

    def __init__(self, max_entries: int = 128) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[int, CacheEntry] = OrderedDict()
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
        return self._longest(prompt)[2]

    def lookup(self, prompt: list[int]) -> CacheEntry | None:
        """The entry sharing the longest start with `prompt`, cut to that start and so that at
        least one prompt id is left to encode (the next token's logits come from it)."""
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
        ids = entry.ids
        extended = [k for k, e in self._entries.items() if ids[: len(e.ids)] == e.ids]
        for key in extended:
            del self._entries[key]
        self._entries[self._next] = entry
        self._next += 1
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def clear(self) -> None:
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


def batch_cache(entries: list[CacheEntry | None], width: int) -> Any:
    """One DynamicCache of `width` positions: row i's entry right-aligned, zeros before it (the
    caller masks them out). None when no row has an entry."""
    from transformers import DynamicCache

    first = next((e for e in entries if e is not None), None)
    if first is None or width == 0:
        return None
    cache = DynamicCache()
    for layer, (k0, v0) in enumerate(first.layers):
        keys = k0.new_zeros((len(entries), k0.shape[1], width, k0.shape[3]))
        values = v0.new_zeros((len(entries), v0.shape[1], width, v0.shape[3]))
        for i, entry in enumerate(entries):
            if entry is not None:
                k, v = entry.layers[layer]
                keys[i, :, width - k.shape[2] :] = k[0]
                values[i, :, width - v.shape[2] :] = v[0]
        cache.update(keys, values, layer)
    return cache


def split_rows(cache: Any, tokens: Any, real: Any) -> list[CacheEntry]:
    """Row i's entry: the positions where `real[i]` is set, with their ids from `tokens[i]`
    (`real` and `tokens` may sit on another device than the cache, as on a GPU)."""
    rows = []
    for i in range(real.shape[0]):
        idx = real[i].nonzero().squeeze(1)
        at = idx.to(cache.layers[0].keys.device) if cache.layers else idx
        layers = [
            (layer.keys[i : i + 1].index_select(2, at), layer.values[i : i + 1].index_select(2, at))
            for layer in cache.layers
        ]
        rows.append(CacheEntry(tokens[i, idx].tolist(), layers))
    return rows
