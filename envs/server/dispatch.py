"""Running blocking env calls off the event loop, several short ones per thread hop.

A thread hop (`run_in_executor`) costs tens of microseconds and a GIL hand-over, which is more
than a step of a light env takes. Calls made in the same event-loop tick are gathered and sent to
the pool in packs sized from the measured cost of that kind of call, so that a pack holds about
`target_s` of work: microsecond steps travel hundreds to a hop, while slow ones (a Docker exec,
a first world build) still go one per thread and run side by side.

How many packs of a kind run at once follows how much of their time is CPU: calls that wait
(on a container, a socket) get every thread, while CPU-bound ones run one pack at a time, since
the GIL runs one anyway and more threads only trade it back and forth, starving the event loop.
The CPU share is sampled only from packs that ran alone: a thread waiting for the GIL burns no
CPU time, so under contention CPU-bound work would look like waiting and get ever more threads.

Calls that are both short (under `inline_below_s` each) and CPU-bound run on the event loop
itself, a pack per loop iteration: the GIL would run them one at a time anyway, and handing them
to a thread and back costs more than they do. The loop still polls its sockets between packs.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_Call = tuple[Callable[..., Any], tuple[Any, ...], asyncio.Future]
_Outcome = tuple[asyncio.Future, Any, BaseException | None]


class PackedExecutor:
    def __init__(self, workers: int, target_s: float = 0.002, max_pack: int = 256,
                 inline_below_s: float = 0.0005) -> None:
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agentrl-env")
        self.workers = workers
        self.target_s = target_s
        self.max_pack = max_pack
        self.inline_below_s = inline_below_s
        self.cost: dict[str, float] = {}  # moving average of seconds per call, by kind
        self.cpu_share: dict[str, float] = {}  # moving average of CPU time / wall time, by kind
        self._pending: dict[str, list[_Call]] = {}
        self._waiting: dict[str, deque[list[_Call]]] = {}
        self._running: dict[str, int] = {}
        self._busy = 0  # packs in flight, all kinds
        self._scheduled = False

    def run(self, kind: str, fn: Callable[..., Any], *args: Any) -> asyncio.Future:
        """Schedule `fn(*args)` in a worker thread; `kind` groups calls of similar cost."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending.setdefault(kind, []).append((fn, args, future))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush, loop)
        return future

    def pack_size(self, kind: str) -> int:
        cost = self.cost.get(kind)
        if cost is None:  # not measured yet: assume slow
            return 1
        return max(1, min(self.max_pack, int(self.target_s / max(cost, 1e-7))))

    def concurrency(self, kind: str) -> int:
        share = self.cpu_share.get(kind)
        return self.workers if share is not None and share < 0.5 else 1

    def inline(self, kind: str) -> bool:
        """Whether calls of `kind` run on the event loop: measured short and CPU-bound."""
        cost, share = self.cost.get(kind), self.cpu_share.get(kind)
        return cost is not None and share is not None and cost < self.inline_below_s and share >= 0.8

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, {}
        for kind, calls in pending.items():
            size = self.pack_size(kind)
            waiting = self._waiting.setdefault(kind, deque())
            waiting.extend(calls[start:start + size] for start in range(0, len(calls), size))
            self._pump(loop, kind)

    def _pump(self, loop: asyncio.AbstractEventLoop, kind: str) -> None:
        waiting = self._waiting[kind]
        while waiting and self._running.get(kind, 0) < self.concurrency(kind):
            pack = waiting.popleft()
            uncontended = self._busy == 0
            if self.inline(kind):
                self._running[kind] = self._running.get(kind, 0) + 1
                self._busy += 1
                loop.call_soon(self._deliver, loop, kind, *self._run_pack(pack, uncontended))
                continue
            try:
                self.pool.submit(self._in_thread, loop, kind, pack, uncontended)
            except RuntimeError as exc:  # the pool was shut down
                for _, _, future in pack:
                    if not future.done():
                        future.set_exception(exc)
                continue
            self._running[kind] = self._running.get(kind, 0) + 1
            self._busy += 1

    def _in_thread(self, loop: asyncio.AbstractEventLoop, kind: str, pack: list[_Call], uncontended: bool
                   ) -> None:
        delivery = self._run_pack(pack, uncontended)
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            loop.call_soon_threadsafe(self._deliver, loop, kind, *delivery)

    @staticmethod
    def _run_pack(pack: list[_Call], uncontended: bool) -> tuple[list[_Outcome], float, float | None]:
        """Run a pack; returns its outcomes, the wall time per call, and its CPU share if it ran alone."""
        outcomes: list[_Outcome] = []
        started, cpu_started = time.perf_counter(), time.thread_time()
        for fn, args, future in pack:
            try:
                outcomes.append((future, fn(*args), None))
            except BaseException as exc:
                outcomes.append((future, None, exc))
        wall = time.perf_counter() - started
        cpu = time.thread_time() - cpu_started
        share = (cpu / wall if wall > 0 else 1.0) if uncontended else None
        return outcomes, wall / len(pack), share

    def _deliver(self, loop: asyncio.AbstractEventLoop, kind: str, outcomes: list[_Outcome],
                 per_call: float, cpu_share: float | None) -> None:
        self._running[kind] -= 1
        self._busy -= 1
        self.cost[kind] = _average(self.cost.get(kind), per_call)
        if cpu_share is not None:
            self.cpu_share[kind] = _average(self.cpu_share.get(kind), min(cpu_share, 1.0))
        self._pump(loop, kind)
        for future, value, exc in outcomes:
            if future.cancelled():
                continue
            if exc is not None:
                future.set_exception(exc)
            else:
                future.set_result(value)

    def shutdown(self) -> None:
        for waiting in self._waiting.values():
            for pack in waiting:
                for _, _, future in pack:
                    if not future.done():
                        future.cancel()
            waiting.clear()
        self.pool.shutdown(wait=True, cancel_futures=True)


def _average(old: float | None, new: float) -> float:
    return new if old is None or math.isnan(old) else 0.8 * old + 0.2 * new
