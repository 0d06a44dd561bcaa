"""Generation backends behind one async interface, batching requests from concurrent episodes.

Rollout workers call `await backend.generate(prompt_ids, max_new_tokens)` one episode at a time;
the backend gathers whatever requests are pending into one batch, so the accelerator sees a
batch while each episode waits on its own env. A backend holds its own copy of the weights,
tagged with a policy version, and takes new weights with `update_weights` after each optimizer
step (in-process; no files).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass
class Generation:
    ids: list[int]
    logprobs: list[float]  # logprob of each id under the sampling distribution (after temperature)
    version: int  # policy version of the weights that sampled it
    stopped: bool  # ended on a stop token (else the token limit)


def never_sampled_ids(tokenizer: Any) -> list[int]:
    """Control tokens except the stop token: sampling one mid-turn would leave a transcript the chat
    template cannot render (drift), so the sampler and the trainer's recomputation both exclude them."""
    special = {i for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items() if t.special}
    return sorted((special | set(tokenizer.all_special_ids)) - {tokenizer.eos_token_id})


class GenerationBackend(Protocol):
    version: int
    suppress_ids: list[int]
    generated_tokens: int
    busy_s: float

    async def generate(self, prompt_ids: list[int], max_new_tokens: int) -> Generation: ...

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None: ...


@dataclass
class _Request:
    prompt: list[int]
    max_new: int
    future: asyncio.Future


class BatchingBackend:
    """Queue + batcher shared by the concrete backends; subclasses implement `generate_batch`."""

    def __init__(self, max_batch: int = 64, batch_wait_s: float = 0.002) -> None:
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

    def generate_batch(self, prompts: list[list[int]], max_new: list[int]) -> list[Generation]:
        raise NotImplementedError

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        raise NotImplementedError

    async def generate(self, prompt_ids: list[int], max_new_tokens: int) -> Generation:
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._wake = asyncio.Event()
            self._pending = []
            self._task = loop.create_task(self._batcher())
        future = loop.create_future()
        self._pending.append(_Request(list(prompt_ids), max_new_tokens, future))
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
                        self._timed_batch, [r.prompt for r in batch], [r.max_new for r in batch]
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

    def _timed_batch(self, prompts: list[list[int]], max_new: list[int]) -> list[Generation]:
        start = time.perf_counter()
        with self._weights_lock:
            out = self.generate_batch(prompts, max_new)
        self.busy_s += time.perf_counter() - start
        self.batches += 1
        self.generated_tokens += sum(len(g.ids) for g in out)
        return out


class HFBackend(BatchingBackend):
    """transformers `generate` with left padding; CPU or GPU."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_batch: int = 64,
        batch_wait_s: float = 0.002,
    ) -> None:
        super().__init__(max_batch=max_batch, batch_wait_s=batch_wait_s)
        self.model = model.eval()
        self.temperature = temperature
        self.top_p = top_p
        self.pad_id = tokenizer.pad_token_id
        self.stop_ids = {tokenizer.eos_token_id}
        self.suppress_ids = never_sampled_ids(tokenizer)
        self.device = next(model.parameters()).device

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        with self._weights_lock:
            self.model.load_state_dict(state_dict)
            self.version = version

    def generate_batch(self, prompts: list[list[int]], max_new: list[int]) -> list[Generation]:
        import torch

        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            attention[i, width - len(p) :] = 1
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=ids.to(self.device),
                attention_mask=attention.to(self.device),
                do_sample=True,
                temperature=self.temperature,
                top_p=self.top_p,
                top_k=None,
                max_new_tokens=max(max_new),
                output_scores=True,
                return_dict_in_generate=True,
                pad_token_id=self.pad_id,
                eos_token_id=sorted(self.stop_ids),
                suppress_tokens=self.suppress_ids or None,
            )
        new = out.sequences[:, width:].cpu()
        # `scores` are the processed logits the sampler drew from (temperature, top-p applied).
        scores = torch.stack(out.scores, dim=1).float()
        logprobs = torch.log_softmax(scores, dim=-1).gather(2, new.to(scores.device)[:, :, None])
        logprobs = logprobs.squeeze(-1).cpu()
        result = []
        for i, limit in enumerate(max_new):
            row = new[i].tolist()
            n, stopped = min(limit, len(row)), False
            for j in range(n):
                if row[j] in self.stop_ids:
                    n, stopped = j + 1, True
                    break
            result.append(Generation(row[:n], logprobs[i, :n].tolist(), self.version, stopped))
        return result
