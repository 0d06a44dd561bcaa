"""Generation backends behind one async interface, batching requests from concurrent episodes.

Rollout workers call `await backend.generate(prompt_ids, max_new_tokens)` one episode at a time;
the backend gathers whatever requests are pending into one batch, so the accelerator sees a
batch while each episode waits on its own env. A backend holds its own copy of the weights,
tagged with a policy version, and takes new weights with `update_weights` after each optimizer
step (in-process; no files).

Sampling is reproducible per request: a request may carry a seed, and its tokens are drawn from
a generator seeded with it alone, so what one episode samples does not depend on which other
requests share its batch or in which order they arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol

from agentrl.agent_train.kv_cache import PrefixCache, batch_cache, split_rows


@dataclass
class Generation:
    ids: list[int]
    logprobs: list[float]  # logprob of each id under the sampling distribution (after temperature)
    version: int  # policy version of the weights that sampled it
    stopped: bool  # ended on a stop token (else the token limit)


def turn_end_ids(tokenizer: Any) -> list[int]:
    """The ids that end an assistant turn: eos, and the token the chat template closes an assistant
    message with when that is another one (Qwen's `<|im_end|>` while eos is `<|endoftext|>`).
    Without it a model could only end its turn by running out of tokens."""
    ends = {tokenizer.eos_token_id}
    if getattr(tokenizer, "chat_template", None):
        marker = "ok"
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": marker}], tokenize=False
        )
        after = text[text.rindex(marker) + len(marker) :]
        closing = tokenizer.encode(after, add_special_tokens=False)[:1]
        if closing and closing[0] in _special_ids(tokenizer):
            ends.add(closing[0])
    return sorted(i for i in ends if i is not None)


def _special_ids(tokenizer: Any) -> set[int]:
    special = {i for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items() if t.special}
    return special | set(tokenizer.all_special_ids)


def never_sampled_ids(tokenizer: Any) -> list[int]:
    """Control tokens except those that end a turn: sampling one mid-turn would leave a transcript
    the chat template cannot render (drift), so the sampler and the trainer's recomputation both
    exclude them."""
    return sorted(_special_ids(tokenizer) - set(turn_end_ids(tokenizer)))


def derive_seed(*parts: int) -> int:
    """A 63-bit seed that depends on every part (e.g. run seed, step, env seed, sample, turn)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


class GenerationBackend(Protocol):
    version: int
    suppress_ids: list[int]
    generated_tokens: int
    busy_s: float

    async def generate(
        self, prompt_ids: list[int], max_new_tokens: int, seed: int | None = None
    ) -> Generation: ...

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None: ...


@dataclass
class _Request:
    prompt: list[int]
    max_new: int
    seed: int
    future: asyncio.Future


class BatchingBackend:
    """Queue + batcher shared by the concrete backends; subclasses implement `generate_batch`."""

    def __init__(self, max_batch: int = 64, batch_wait_s: float = 0.002, seed: int = 0) -> None:
        self.max_batch = max_batch
        self.batch_wait_s = batch_wait_s
        self.version = 0
        self.generated_tokens = 0
        self.busy_s = 0.0  # wall time spent inside generate_batch
        self.batches = 0
        self.suppress_ids: list[int] = []
        self._pending: list[_Request] = []
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._weights_lock = threading.Lock()
        self._rng = random.Random(seed)  # seeds for requests that bring none

    def generate_batch(
        self, prompts: list[list[int]], max_new: list[int], seeds: list[int]
    ) -> list[Generation]:
        raise NotImplementedError

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        raise NotImplementedError

    async def generate(
        self, prompt_ids: list[int], max_new_tokens: int, seed: int | None = None
    ) -> Generation:
        if seed is None:
            seed = self._rng.getrandbits(63)
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._wake = asyncio.Event()
            self._pending = []
            self._task = loop.create_task(self._batcher())
        future = loop.create_future()
        self._pending.append(_Request(list(prompt_ids), max_new_tokens, seed, future))
        assert self._wake is not None
        self._wake.set()
        return await future

    async def _batcher(self) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            # Let the other workers whose env step just finished join this batch.
            await asyncio.sleep(self.batch_wait_s)
            while self._pending:
                batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
                try:
                    results = await asyncio.to_thread(
                        self._timed_batch,
                        [r.prompt for r in batch],
                        [r.max_new for r in batch],
                        [r.seed for r in batch],
                    )
                except Exception as exc:  # hand the error to every waiting episode, keep serving
                    for r in batch:
                        if not r.future.done():
                            r.future.set_exception(exc)
                    continue
                for r, g in zip(batch, results, strict=True):
                    if not r.future.done():
                        r.future.set_result(g)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _timed_batch(
        self, prompts: list[list[int]], max_new: list[int], seeds: list[int]
    ) -> list[Generation]:
        start = time.perf_counter()
        with self._weights_lock:
            out = self.generate_batch(prompts, max_new, seeds)
        self.busy_s += time.perf_counter() - start
        self.batches += 1
        self.generated_tokens += sum(len(g.ids) for g in out)
        return out


DECODE_MODES = ("static", "compiled", "dynamic")
STATIC_WIDTH_STEP = 256  # compiled: widths rounded up to this, so that few shapes (graphs) occur


class HFBackend(BatchingBackend):
    """Batched sampling with a KV cache and left padding; CPU or GPU.

    The KV cache outlives a call: each row's keys and values are kept (`prefix_cache` rows, 0 for
    none) and a later prompt that extends them, the same episode's next turn, encodes only its
    new ids. New weights clear it.

    `decode` picks the cache of the token-by-token loop. "static": after the prompt's pass, each
    batch's keys and values go into buffers of the batch's final width, written in place, and the
    attention mask is that width from the start, so every step has the same shapes (a growing
    cache copies itself whole at every step). "compiled": the same loop with the step
    `torch.compile`d (CUDA graphs on a GPU). "dynamic": the growing cache (transformers'
    `DynamicCache`). The three sample the same tokens.

    Each row draws its tokens from its own generator, seeded by its request. The logits of a row
    still depend in their last bits on the batch around it (kernels differ with batch shape), so
    a model meant to give reproducible samples runs in float64 here (`make_backend` does so on
    CPU): those differences then vanish when logprobs are rounded to float32.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_batch: int = 64,
        batch_wait_s: float = 0.002,
        seed: int = 0,
        prefix_cache: int = 128,
        decode: str = "static",
    ) -> None:
        super().__init__(max_batch=max_batch, batch_wait_s=batch_wait_s, seed=seed)
        if decode not in DECODE_MODES:
            raise ValueError(f"decode must be one of {DECODE_MODES}, not {decode!r}")
        if decode != "dynamic" and "sliding_attention" in (getattr(model.config, "layer_types", None) or []):
            # a static sliding layer keeps only its last window, where the prefix cache needs every position
            raise ValueError(f"{type(model).__name__} has sliding-window layers: use decode='dynamic'")
        self.model = model.eval()
        self.decode = decode
        self.temperature = temperature
        self.top_p = top_p
        self.pad_id = tokenizer.pad_token_id
        self.stop_ids = set(turn_end_ids(tokenizer))
        self.suppress_ids = never_sampled_ids(tokenizer)
        self.device = next(model.parameters()).device
        # transformers 5 renamed the KV cache argument (and output) from `past_key_values` to `cache`
        params = inspect.signature(model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        # logits of the last position only: a prompt's other positions would cost a vocab-sized matmul each
        self._last_logits_only = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
        # keys and values of each episode's transcript so far, so the next turn encodes only its new ids
        self.prefix_cache = PrefixCache(prefix_cache) if prefix_cache else None
        self._step = self._decode_step
        if decode == "compiled":
            import torch

            # CUDA: CUDA graphs replay a step's kernels in one launch (the step is launch-bound)
            mode = "reduce-overhead" if self.device.type == "cuda" else None
            self._step = torch.compile(self._decode_step, mode=mode)

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        with self._weights_lock:
            self.model.load_state_dict(state_dict)
            self.version = version
            if self.prefix_cache is not None:  # keys and values of the old weights
                self.prefix_cache.clear()

    def release(self, ids: list[int]) -> None:
        """The episode whose transcript is `ids` has ended: its keys and values leave the prefix
        cache now rather than when new weights come, which with rollouts a step ahead is after the
        next step's episodes have each stored a transcript's worth beside them."""
        if self.prefix_cache is not None:
            self.prefix_cache.release(ids)

    def next_token_logprobs(self, logits: Any) -> Any:
        """What the sampler draws from: temperature, never-sampled ids removed, then top-p."""
        import torch

        logits = logits.double() / self.temperature
        if self.suppress_ids:
            logits[:, self.suppress_ids] = float("-inf")
        if self.top_p < 1.0:
            probs, order = torch.sort(torch.softmax(logits, -1), dim=-1, descending=True)
            outside = probs.cumsum(-1) - probs > self.top_p  # the most likely token always stays
            logits = logits.scatter(1, order, logits.gather(1, order).masked_fill(outside, float("-inf")))
        return torch.log_softmax(logits, dim=-1)

    def _encode_shared_prompts(self, prompts: list[list[int]]) -> None:
        """Encode once, into the prefix cache, each prompt that several rows of this batch start
        from and the cache does not hold yet: a GRPO group's first turn is one task's prompt
        sampled G times, and its prefill would otherwise cost G rows. Every row then takes the
        prompt's keys and values from the cache and encodes only its last id (whose logits it
        samples from), as a later turn does."""
        if self.prefix_cache is None:
            return
        cache = self.prefix_cache
        counts = Counter(tuple(p) for p in prompts)
        shared = [list(p[:-1]) for p, count in counts.items()
                  if count > 1 and len(p) > 2 and cache.covered(list(p)) < len(p) - 1]
        if not shared:
            return
        import torch

        tokens, attention, positions, ids, past = self._first_pass(shared)
        with torch.inference_mode():
            out = self._forward(ids, attention.to(self.device), positions, past)
        for row in split_rows(getattr(out, self._cache_arg), tokens, attention.bool()):
            cache.store(row)

    def _first_pass(self, prompts: list[list[int]]) -> tuple[Any, Any, Any, Any, Any]:
        """The inputs of a batch's first forward pass: each row's cached prefix (if any) as a
        cache, and its new ids. Row i is [pad][its cached prefix][pad][its new prompt ids]; pads
        are masked out. Returns all tokens and the mask (cached part included), the new ids'
        positions and ids, and the cache."""
        import torch

        n = len(prompts)
        reused = [self.prefix_cache.lookup(p) if self.prefix_cache else None for p in prompts]
        consumed = self.prefix_cache.take_extended(prompts) if self.prefix_cache else []
        past = [0 if r is None else len(r.ids) for r in reused]
        suffixes = [p[k:] for p, k in zip(prompts, past, strict=True)]
        width_past, width_new = max(past), max(len(s) for s in suffixes)
        tokens = torch.full((n, width_past + width_new), self.pad_id, dtype=torch.long)
        attention = torch.zeros((n, width_past + width_new), dtype=torch.long)
        for i, (entry, suffix) in enumerate(zip(reused, suffixes, strict=True)):
            if entry is not None:
                tokens[i, width_past - past[i] : width_past] = torch.tensor(entry.ids, dtype=torch.long)
                attention[i, width_past - past[i] : width_past] = 1
            tokens[i, tokens.shape[1] - len(suffix) :] = torch.tensor(suffix, dtype=torch.long)
            attention[i, tokens.shape[1] - len(suffix) :] = 1
        positions = (attention.cumsum(-1) - 1).clamp_min(0)[:, width_past:].to(self.device)
        ids = tokens[:, width_past:].to(self.device)
        return tokens, attention, positions, ids, batch_cache(reused, width_past, consumed)

    def _static_mask(self, attention: Any, steps: int) -> Any:
        """The attention mask at the static cache's width: the prompts' columns, then zeros."""
        import torch

        width = attention.shape[1] + steps
        if self.decode == "compiled":
            width = -(-width // STATIC_WIDTH_STEP) * STATIC_WIDTH_STEP
        mask = torch.zeros((attention.shape[0], width), dtype=attention.dtype)
        mask[:, : attention.shape[1]] = attention
        return mask

    def _prompt_step(
        self, ids: Any, attention: Any, positions: Any, cache: Any, width: int
    ) -> tuple[Any, Any]:
        """The first forward pass of a batch: its new prompt ids over the cached prefixes. Returns the
        last position's logits and the cache the next steps extend: for a static decode, a
        `StaticCache` of `width` positions holding what this pass's cache holds."""
        out = self._forward(ids, attention.to(self.device), positions, cache)
        grown = getattr(out, self._cache_arg)
        if self.decode == "dynamic":
            return out.logits[:, -1], grown
        from transformers import StaticCache

        static = StaticCache(config=self.model.config, max_cache_len=width)
        layers: list[Any] = list(static.layers)  # full-attention layers (sliding-window models are refused)
        assert len(layers) == len(grown.layers), "one static layer per layer of the model"
        for layer in layers:  # each grown layer goes once copied: never two whole caches at once
            done = grown.layers.pop(0)
            layer.update(done.keys, done.values)
            del done
        return out.logits[:, -1], static

    def _forward(self, ids: Any, attention: Any, positions: Any, cache: Any) -> Any:
        return self.model(
            input_ids=ids,
            attention_mask=attention,
            position_ids=positions,
            use_cache=True,
            **{self._cache_arg: cache},
            **self._last_logits_only,
        )

    def _decode_step(self, ids: Any, attention: Any, positions: Any, cache: Any) -> Any:
        """One token per row: the logits of its next one. With a static cache every call has the same
        shapes and writes the cache in place, which is what `torch.compile` and CUDA graphs need."""
        return self._forward(ids, attention, positions, cache).logits[:, -1]

    def generate_batch(
        self, prompts: list[list[int]], max_new: list[int], seeds: list[int]
    ) -> list[Generation]:
        import torch

        n = len(prompts)
        self._encode_shared_prompts(prompts)
        tokens, attention, positions, ids, cache = self._first_pass(prompts)
        generators = [torch.Generator().manual_seed(s) for s in seeds]
        stop = torch.tensor(sorted(self.stop_ids))
        limits = torch.tensor(max_new)
        new = torch.full((n, max(max_new)), self.pad_id, dtype=torch.long)
        logprobs = torch.zeros((n, max(max_new)), dtype=torch.float64)
        done = torch.zeros(n, dtype=torch.bool)
        first = attention.shape[1]  # positions before the first new token: prompts (and cached prefixes)
        # static: the mask is the final width from the start (0 where nothing is yet); dynamic: grows
        mask = attention if self.decode == "dynamic" else self._static_mask(attention, max(max_new))
        with torch.inference_mode():
            for t in range(max(max_new)):
                if t == 0:  # the prompts' pass: its width varies from batch to batch, never compiled
                    logits, cache = self._prompt_step(ids, attention, positions, cache, mask.shape[1])
                else:
                    logits = self._step(ids, mask.to(self.device), positions, cache)
                logp = self.next_token_logprobs(logits)
                # inverse-CDF sampling with one uniform in (0, 1] per row, from that row's generator;
                # u > 0 never lands on a zero-probability token. Drawn where the logits are: on a GPU
                # only each row's token and its logprob cross to the host, not a vocab-wide row each
                u = 1.0 - torch.cat([torch.rand(1, generator=g, dtype=torch.float64) for g in generators])
                cdf = logp.exp().cumsum(-1)
                drawn = torch.searchsorted(cdf, (u.to(cdf.device) * cdf[:, -1])[:, None])
                token = drawn.squeeze(1).cpu()
                new[:, t] = torch.where(done, self.pad_id, token)
                logprobs[:, t] = logp.gather(1, drawn).squeeze(1).cpu()
                alive = ~done  # rows whose token at t is theirs; a finished row's next inputs are masked
                done |= torch.isin(token, stop) | (t + 1 >= limits)
                if done.all():
                    break
                ids = new[:, t : t + 1].to(self.device)
                tokens = torch.cat([tokens, new[:, t : t + 1]], dim=1)
                if self.decode == "dynamic":
                    mask = torch.cat([mask, alive[:, None].long()], dim=1)
                else:
                    mask[:, first + t] = alive.long()
                positions = positions[:, -1:] + 1
        attention = mask[:, : tokens.shape[1]]  # the positions the cache holds
        if self.prefix_cache is not None:
            for row in split_rows(cache, tokens, attention.bool()):
                self.prefix_cache.store(row)
        result = []
        for i, limit in enumerate(max_new):
            row = new[i, :limit].tolist()
            n_i, stopped = len(row), False
            for j, tok in enumerate(row):
                if tok in self.stop_ids:
                    n_i, stopped = j + 1, True
                    break
            result.append(Generation(row[:n_i], logprobs[i, :n_i].float().tolist(), self.version, stopped))
        return result
