"""Keys and values kept between the turns of an episode, so a turn encodes only its new tokens.

An episode's next prompt is its previous prompt, the ids it sampled and the env's reply, all as
ids (token-in/token-out), so the attention keys and values of everything before the reply are
already known when the next turn starts. `PrefixCache` keeps them per sequence, keyed by the ids
they were computed from: a prompt reuses the longest entry that is a prefix of it (vLLM's
automatic prefix caching, by exact token match). `batch_cache` lines several rows' entries up
into one cache, left-padded, and `split_rows` cuts a batch's cache back into rows once it has
generated. Nothing here changes what a model computes for a token: a cached key is the one the
same forward pass would produce again, up to float rounding.
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

    def lookup(self, prompt: list[int]) -> CacheEntry | None:
        """The longest entry whose ids start `prompt`, cut so that at least one prompt id is left to
        encode (the next token's logits come from it)."""
        best_key, best = -1, None  # the key is read only once `best` is set
        for key, entry in self._entries.items():
            n = len(entry.ids)
            if (best is None or n > len(best.ids)) and n <= len(prompt) and prompt[:n] == entry.ids:
                best_key, best = key, entry
        if best is None:
            return None
        self._entries.move_to_end(best_key)
        use = min(len(best.ids), len(prompt) - 1)
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
