"""Running blocking env calls off the event loop, several short ones per thread hop.

A thread hop (`run_in_executor`) costs tens of microseconds and a GIL hand-over, which is more
than a step of a light env takes. Calls made in the same event-loop tick are gathered and sent to
the pool in packs sized from the measured cost of that kind of call, so that a pack holds about
`target_s` of work: microsecond steps travel hundreds to a hop, while slow ones (a Docker exec,
a first world build) still go one per thread and run side by side.

How many packs of a kind run at once follows how much of their time is CPU: calls that wait
(on a container, a socket) get every thread, while CPU-bound ones run one pack at a time, since
the GIL runs one anyway and more threads only trade it back and forth, starving the event loop;
calls that mostly wait (under `MOSTLY_WAITING` of their time on a CPU) run about 1 / (CPU share)
packs at once, enough to keep one core busy.
The CPU share is sampled only from packs that ran alone: a thread waiting for the GIL burns no
CPU time, so under contention CPU-bound work would look like waiting and get ever more threads.
A kind running on every thread gets a pack alone every `RESAMPLE_EVERY` packs (the others wait for
the threads to drain), so that a kind whose first calls waited and whose later ones compute is
seen for what it became.
Likewise time spent runnable but off the CPU (a busy machine running other processes) is taken
out of the wall time where Linux reports it (`/proc/thread-self/schedstat`), or CPU-bound work on
a loaded machine would look like waiting too.

Calls measured short (under `inline_below_s` each, whether they compute or wait; once there, under
`LEAVE_LOOP_AT` times that) run on the event loop itself, a pack per loop iteration: handing them to
a thread and back costs more than they do, and the GIL would mostly run them one at a time anyway.
The loop still polls its sockets between packs, so no pack holds it longer than about `target_s`. A
call that computes costs more in a thread than on the loop: it waits for the GIL whenever the loop
runs, and on a busy core the two threads take turns and evict each other's caches (served Flights-v0
steps measured 0.55 to 1 ms in a thread, 0.4 to 0.7 ms on the loop). So a kind that mostly computes
and measures under `PROBE_BELOW` times the bound in threads gets one pack on the loop every
`RESAMPLE_EVERY` packs, whose time replaces the thread's figures: it stays on the loop if it is
short there.
A caller may also run a call of a kind measured short itself, right where it is, and report the
time it took (`ran_inline`): the episode registry does so for steps, which saves a future, a
callback and a task wake-up per step. `run_in_order` runs a batch of calls that way, each at once
where it can, else in a task, one episode's calls in their order.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Container, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

_Call = tuple[Callable[..., Any], tuple[Any, ...], asyncio.Future]
_Outcome = tuple[asyncio.Future, Any, BaseException | None]
MIN_SAMPLES = 3
COST_WINDOW = 9  # packs whose median is a kind's cost
MOSTLY_WAITING = 0.25  # CPU share under which calls of a kind get more than one thread
RESAMPLE_EVERY = 64
LEAVE_LOOP_AT = 2.0  # a kind on the loop goes back to the threads past this many times `inline_below_s`
PROBE_BELOW = 4.0  # computing kinds under this many times `inline_below_s` in threads are tried on the loop
Item = TypeVar("Item")
Answer = TypeVar("Answer")


class PackedExecutor:
    def __init__(self, workers: int, target_s: float = 0.002, max_pack: int = 256,
                 inline_below_s: float = 0.0005) -> None:
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agentrl-env")
        self.workers = workers
        self.target_s = target_s
        self.max_pack = max_pack
        self.inline_below_s = inline_below_s
        # seconds per call, by kind: the median of the last few packs, so that one pack that the
        # machine held up (preempted, paging) does not send a light kind off the loop for long
        self.cost: dict[str, float] = {}
        self._recent: dict[str, deque[float]] = {}
        self._on_loop: set[str] = set()  # kinds whose calls run on the event loop
        # calls that callers ran on the loop themselves, not yet folded into `cost`: (seconds, calls)
        self._inline_run: dict[str, tuple[float, int]] = {}
        self._inline_mark: tuple[float, float] | None = None  # (wall clock, queued time) at the last fold
        self.cpu_share: dict[str, float] = {}  # moving average of CPU time / wall time, by kind
        self._pending: dict[str, list[_Call]] = {}
        self._waiting: dict[str, deque[list[_Call]]] = {}
        self._running: dict[str, int] = {}
        self._samples: dict[str, int] = {}  # CPU-share samples taken, by kind
        self._unsampled: dict[str, int] = {}  # packs started since the last sample, by kind
        self._since_probe: dict[str, int] = {}  # packs sent to threads since last tried on the loop
        self._busy = 0  # packs in flight, all kinds
        self._launches = 0  # packs started so far, all kinds
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

    def queued(self) -> int:
        """Calls accepted and not yet started: what an autoscaler reads as this server's queue
        (`agentrl_holder_queue_depth`), read at scrape time, so it costs the hot path nothing."""
        pending = sum(len(calls) for calls in self._pending.values())
        return pending + sum(len(pack) for packs in self._waiting.values() for pack in packs)

    def pack_size(self, kind: str) -> int:
        cost = self.cost.get(kind)
        if cost is None:  # not measured yet: assume slow
            return 1
        return max(1, min(self.max_pack, int(self.target_s / max(cost, 1e-7))))

    def concurrency(self, kind: str) -> int:
        """Packs of `kind` to run at once: one for calls that mostly compute (more would only trade
        the GIL back and forth, and a GIL passed between many threads on a busy core costs more CPU
        than the calls), else about 1 / their CPU share, enough to keep one core busy (every
        thread for calls that only wait). One until a few samples say (one odd first call must
        not hand a CPU-bound kind every thread)."""
        share = self.cpu_share.get(kind)
        if share is None or share >= MOSTLY_WAITING or self._samples.get(kind, 0) < MIN_SAMPLES:
            return 1
        return max(1, min(self.workers, round(1 / max(share, 1 / self.workers))))

    def inline(self, kind: str) -> bool:
        """Whether calls of `kind` run on the event loop: measured short (see `_measured`)."""
        return kind in self._on_loop

    def ran_inline(self, kind: str, seconds: float) -> None:
        """Count one call of `kind` that a caller ran on the loop itself, because `inline(kind)` said
        so (see `EpisodeRegistry.step_now`): calls are folded into the kind's cost a pack's worth at
        a time, so that a kind that grows slow goes back to the threads as if it had run here."""
        total, calls = self._inline_run.get(kind, (0.0, 0))
        total, calls = total + seconds, calls + 1
        if total < self.target_s and calls < self.max_pack:
            self._inline_run[kind] = (total, calls)
            return
        self._inline_run[kind] = (0.0, 0)
        # the calls were timed by the wall clock; take out the share of time the loop's thread
        # spent waiting for a CPU since the last fold, as `_run_pack` does for the threads
        now, (_, queued) = time.perf_counter(), _thread_clock()
        if self._inline_mark is not None:
            since, queued_since = now - self._inline_mark[0], queued - self._inline_mark[1]
            total *= max(0.0, 1.0 - queued_since / max(since, 1e-9))
        self._inline_mark = (now, queued)
        self._measured(kind, total / calls)

    def _measured(self, kind: str, per_call: float) -> None:
        """Fold one measurement into the kind's cost, and decide where its calls run: a kind comes
        onto the loop under `inline_below_s` and leaves it past `LEAVE_LOOP_AT` times that, so that
        a second in which the machine runs at half speed does not send a kind to the threads, where
        it would cost more still, and back (Flights-v0 steps measure 0.4 to 0.7 ms on the loop)."""
        recent = self._recent.setdefault(kind, deque(maxlen=COST_WINDOW))
        recent.append(per_call)
        cost = self.cost[kind] = statistics.median(recent)
        bound = self.inline_below_s * (LEAVE_LOOP_AT if kind in self._on_loop else 1.0)
        if cost < bound:
            self._on_loop.add(kind)
        else:
            self._on_loop.discard(kind)

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
            if self._busy and self._unsampled.get(kind, 0) >= RESAMPLE_EVERY:
                break  # the next pack goes alone, once the threads have drained
            pack = waiting.popleft()
            # a pack ran alone if nothing else ran when it started and nothing started before its end
            launch = self._launches + 1 if self._busy == 0 else None
            inline = self.inline(kind)
            probe = not inline and self._probe_due(kind)
            if inline or probe:
                self._started(kind)
                loop.call_soon(self._deliver, loop, kind, launch, *self._run_pack(pack), probe)
                continue
            self._since_probe[kind] = self._since_probe.get(kind, 0) + 1
            try:
                self.pool.submit(self._in_thread, loop, kind, pack, launch)
            except RuntimeError as exc:  # the pool was shut down
                for _, _, future in pack:
                    if not future.done():
                        future.set_exception(exc)
                continue
            self._started(kind)

    def _probe_due(self, kind: str) -> bool:
        """Whether the next pack of `kind`, bound for a thread, should run on the loop instead to
        see whether it is short there (see the module's docstring)."""
        if self._since_probe.get(kind, 0) < RESAMPLE_EVERY or self._samples.get(kind, 0) < MIN_SAMPLES:
            return False
        cost, share = self.cost.get(kind), self.cpu_share.get(kind, 0.0)
        if cost is None or share < MOSTLY_WAITING or cost >= PROBE_BELOW * self.inline_below_s:
            return False
        self._since_probe[kind] = 0
        return True

    def _started(self, kind: str) -> None:
        self._unsampled[kind] = self._unsampled.get(kind, 0) + 1
        self._running[kind] = self._running.get(kind, 0) + 1
        self._busy += 1
        self._launches += 1

    def _in_thread(self, loop: asyncio.AbstractEventLoop, kind: str, pack: list[_Call], launch: int | None
                   ) -> None:
        delivery = self._run_pack(pack)
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
            loop.call_soon_threadsafe(self._deliver, loop, kind, launch, *delivery, False)

    @staticmethod
    def _run_pack(pack: list[_Call]) -> tuple[list[_Outcome], float, float]:
        """Run a pack; returns its outcomes, the time per call, and its CPU share. The pack lets go
        of its calls once they ran: the thread's work item still holds it while the answers travel,
        and a call's function and arguments (a closed episode's env) must be freed when the caller
        is done with them, not when the thread gets round to its next pack."""
        outcomes: list[_Outcome] = []
        started, (cpu_started, queued_started) = time.perf_counter(), _thread_clock()
        for fn, args, future in pack:
            try:
                outcomes.append((future, fn(*args), None))
            except BaseException as exc:
                outcomes.append((future, None, exc))
        cpu_ended, queued_ended = _thread_clock()
        # the time it had a CPU or waited for something other than a CPU
        wall = max(time.perf_counter() - started - (queued_ended - queued_started), 1e-9)
        calls = len(pack)
        pack.clear()
        return outcomes, wall / calls, min(1.0, (cpu_ended - cpu_started) / wall)

    def _deliver(self, loop: asyncio.AbstractEventLoop, kind: str, launch: int | None,
                 outcomes: list[_Outcome], per_call: float, cpu_share: float, probe: bool) -> None:
        self._running[kind] -= 1
        self._busy -= 1
        if probe:  # the kind's time on the loop: what its thread figures overstated
            self._recent[kind].clear()
        self._measured(kind, per_call)
        if launch is not None and launch == self._launches:  # it ran alone: its CPU share is its own
            self.cpu_share[kind] = _average(self.cpu_share.get(kind), cpu_share)
            self._samples[kind] = self._samples.get(kind, 0) + 1
            self._unsampled[kind] = 0
        self._pump(loop, kind)
        if not self._busy:  # a kind may be waiting for the threads to drain
            for other, waiting in self._waiting.items():
                if waiting and other != kind:
                    self._pump(loop, other)
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


_schedstat = threading.local()


def _thread_clock() -> tuple[float, float]:
    """Seconds the calling thread has run on a CPU, and has waited runnable for one where Linux says
    (0 elsewhere). The CPU time is the thread's clock: schedstat's own lags until a context switch."""
    fd = getattr(_schedstat, "fd", None)
    if fd is None:
        try:
            fd = _schedstat.fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        except OSError:
            fd = _schedstat.fd = -1
    queued = int(os.pread(fd, 128, 0).split()[1]) / 1e9 if fd >= 0 else 0.0
    return time.thread_time(), queued


def _average(old: float | None, new: float) -> float:
    return new if old is None or math.isnan(old) else 0.8 * old + 0.2 * new


class LoopSlices:
    """A batch's calls run right on the event loop, back to back while a time slice (`slice_s`)
    lasts; between slices the loop reads and writes, so that a large batch does not hold it and the
    batches of many connections take turns. Every batch run on the loop is cut here: a `/v1/ws`
    frame where it is read and in its connection's queue (`agentrl.server.step_socket`), and
    `run_in_order`."""

    def __init__(self, slice_s: float) -> None:
        self.slice_s = slice_s
        self.end = time.perf_counter() + slice_s

    def run(self, items: Sequence[Item], now: Callable[[Item], Answer | None], start: int = 0
            ) -> tuple[list[Answer], bool]:
        """The answers of `items` from `start` on, each run by `now` while the slice lasts (one at
        least), and whether they stopped at an item `now` could not run (it answered None)."""
        answers: list[Answer] = []
        for i in range(start, len(items)):
            answer = now(items[i])
            if answer is None:
                return answers, True
            answers.append(answer)
            if time.perf_counter() > self.end:
                break
        return answers, False

    async def next(self) -> None:
        """Let the loop read and write, then start the next slice."""
        await asyncio.sleep(0)
        self.end = time.perf_counter() + self.slice_s


async def run_in_order(items: Sequence[Item], now: Callable[[Item, Container[str]], Answer | None],
                       later: Callable[[Item], Coroutine[Any, Any, Answer]], slice_s: float) -> list[Answer]:
    """Each item's answer, in the order given: `now(item, busy)` runs an item that can run at
    once, else returns None and `later(item)` answers it in a task. The steps of every entry
    (`EpisodeRegistry.run_steps`) and the items of a `/v1/ws` frame (`agentrl.server.frame_calls`)
    run here.

    Items that can run at once run here, slice by slice (`LoopSlices`); each of the others gets a
    task (the episode's lock, the dispatcher). The items start in order, an episode's lock is first
    come, first served, and an episode with an item gone to a task has its later items go the same
    way (`busy`), so the items of one episode in one batch run in its order. Handing an item to a
    task takes no slice: the calls it makes are packed.
    """
    parts: list[Any] = []
    handed: list[tuple[int, asyncio.Task]] = []
    busy: set[str] = set()
    slices = LoopSlices(slice_s)
    loop = asyncio.get_running_loop()

    def run_now(item: Item) -> Answer | None:
        return now(item, busy)

    while len(parts) < len(items):
        more, stopped = slices.run(items, run_now, len(parts))
        parts += more
        if stopped:
            item = items[len(parts)]
            episode_id = getattr(item, "episode_id", None)  # a create has none yet
            if episode_id is not None:
                busy.add(episode_id)
            handed.append((len(parts), loop.create_task(later(item))))
            parts.append(None)
        elif len(parts) < len(items):
            await slices.next()
    for i, task in handed:
        parts[i] = await task
    return parts
