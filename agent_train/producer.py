"""Rollouts one step ahead: a background event loop collects step s's groups while step s - 1 trains.

Weights are pushed between rollout steps, never during one, so step s's rollouts always see policy
version s - max_staleness; seeds (env and sampling) are fixed by the config and the step, so the
collected groups are the same however the episodes interleave.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from typing import Any

from agentrl.agent_train.backends import derive_seed
from agentrl.agent_train.config import TrainConfig
from agentrl.agent_train.credit import groups_collector
from agentrl.agent_train.evaluate import evaluate
from agentrl.agent_train.rollout import RolloutEpisode, Rollouts


def train_seeds(cfg: TrainConfig, step: int) -> list[int]:
    """The env seeds (one per group) of a training step."""
    base = cfg.seed * 1_000_003 + step * cfg.groups_per_step
    return [base + i for i in range(cfg.groups_per_step)]


def eval_seeds(cfg: TrainConfig) -> list[int]:
    """The env seeds of every evaluation (of the eval split, where the env has splits)."""
    return [cfg.eval_seed_offset + i for i in range(cfg.eval_seeds)]


class RolloutProducer:
    """Collects step s's groups on its own event loop thread once the policy version reaches
    s - max_staleness, so rollouts for the next step run while the current one trains.

    Training episodes come from the train split, evaluation episodes from the held-out split
    (`train_spec` and `eval_spec` differ only in their env kwargs)."""

    TRAIN, EVAL = 1, 2  # sampling-seed streams; every eval reuses one (common random numbers)

    def __init__(self, cfg: TrainConfig, train_spec: Rollouts, eval_spec: Rollouts):
        self.cfg, self.train_spec, self.eval_spec = cfg, train_spec, eval_spec
        self.backend = train_spec.backend
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="rollouts")
        self.out: queue.Queue = queue.Queue()
        self.version = 0
        self.collected = -1  # the last step whose rollouts are done
        self._cond = threading.Condition()
        self._job: Any = None
        self._task: asyncio.Task | None = None
        self.closed = False
        self.thread.start()

    def start(self, first_step: int, steps: int) -> None:
        self.collected = first_step - 1
        self._job = asyncio.run_coroutine_threadsafe(self._produce(first_step, steps), self.loop)

    async def _cancel(self, task: asyncio.Task | None) -> None:
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _produce(self, first_step: int, steps: int) -> None:
        self._task = asyncio.current_task()
        collect_groups = groups_collector(self.cfg)  # branch credit's roots fork as they go
        for step in range(first_step, steps):
            await asyncio.to_thread(self._wait_for_version, step - self.cfg.max_staleness)
            start = time.perf_counter()
            tokens_before, busy_before = self.backend.generated_tokens, self.backend.busy_s
            groups = await collect_groups(
                self.train_spec,
                train_seeds(self.cfg, step),
                self.cfg.group_size,
                sample_seed=derive_seed(self.cfg.seed, self.TRAIN, step),
            )
            timing = {
                "rollout_s": time.perf_counter() - start,
                "gen_tokens": self.backend.generated_tokens - tokens_before,
                "gen_busy_s": self.backend.busy_s - busy_before,
            }
            self.out.put((step, groups, timing))
            with self._cond:
                self.collected = step
                self._cond.notify_all()

    def _wait_for_version(self, version: int) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self.version >= version or self.closed)

    def wait_collected(self, step: int) -> None:
        """Block until step's rollouts are done (they must not see the weights pushed next)."""
        with self._cond:
            while not self._cond.wait_for(lambda: self.collected >= step, timeout=0.5):
                if self._job is not None and self._job.done():
                    self._job.result()  # re-raises a rollout failure here
                    raise RuntimeError("rollout producer stopped early")

    def set_version(self, version: int) -> None:
        with self._cond:
            self.version = version
            self._cond.notify_all()

    def get(self) -> tuple[int, list[list[RolloutEpisode]], dict[str, float]]:
        while True:
            try:
                return self.out.get(timeout=0.5)
            except queue.Empty:
                if self._job is not None and self._job.done():
                    self._job.result()  # re-raises a rollout failure here
                    raise RuntimeError("rollout producer stopped early") from None

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def evaluate(self, seeds: list[int], k: int) -> tuple[dict[str, float], list[RolloutEpisode]]:
        sample_seed = derive_seed(self.cfg.seed, self.EVAL)
        return self.run(evaluate(self.eval_spec, seeds, k, sample_seed, progress=self.cfg.progress))

    def close(self) -> None:
        with self._cond:  # a producer waiting for a policy version that will never come returns
            self.closed = True
            self._cond.notify_all()
        if self._job is not None and not self._job.done():
            self.run(self._cancel(self._task))  # the task ends before its loop stops
        aclose = getattr(self.backend, "aclose", None)  # a batching backend runs a task of its own
        if aclose is not None:
            try:
                self.run(aclose())
            except Exception:  # the loop must still stop and the thread end: said, not raised
                logging.getLogger(__name__).warning("closing the generation backend failed", exc_info=True)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
