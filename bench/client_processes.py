"""The benchmarks' clients in processes of their own: one window, their figures gathered, both sides' CPU.

Not a benchmark itself (tests/bench runs every other `bench/*.py` in its quick mode): the benches
import it as they import each other, with their own folder on `sys.path`.

One client process (one event loop, one client) tops out before two server processes do on a light
env, so a bench that drives servers from it measures its client, not the servers. Here the same work
is split over K spawned processes, each with its own client and event loop, that open and close
their measuring window together; over that window the parent reads, from /proc, the CPU of every
server process and of every client process, so a row says which side was busy and the servers'
figure per second of their own CPU is there to compare where both share the cores.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import queue
import threading
import time
import traceback
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from multiprocessing.synchronize import Barrier, Event
from typing import Any

from measuring import server_cpu_s  # bench/measuring.py: a process's CPU seconds, from /proc

START_TIMEOUT_S = 300.0  # a loaded two-core machine spawns and imports slowly


class Gate:
    """What a client process waits on: `opened` once its work is set up (returns when every client
    is and the parent has read the CPU), `closed` once its window is over (returns when the parent
    has read the CPU again); whatever it does after `closed` (closing episodes) is outside the window."""

    def __init__(self, met: Barrier, go: Event, released: Event, timeout_s: float) -> None:
        self._met, self._go, self._released, self._timeout_s = met, go, released, timeout_s

    def opened(self) -> None:
        self._met.wait(timeout=self._timeout_s)
        if not self._go.wait(timeout=self._timeout_s):
            raise TimeoutError("the window did not open")

    def closed(self) -> None:
        self._met.wait(timeout=self._timeout_s)
        if not self._released.wait(timeout=self._timeout_s):
            raise TimeoutError("the window was not closed")

    def abort(self) -> None:
        """Break the barrier: every process waiting on it (the parent included) raises at once."""
        self._met.abort()


Drive = Callable[..., Coroutine[Any, Any, dict[str, Any]]]


def _child(drive: Drive, args: tuple[Any, ...], gate: Gate, out: Any) -> None:
    """A client process: `drive(*args, gate)` on an event loop of its own; its figures, or its
    traceback, on `out`."""
    try:
        out.put(("done", asyncio.run(drive(*args, gate))))
    except BaseException:
        out.put(("failed", traceback.format_exc()))
        gate.abort()
        raise


@dataclass(frozen=True)
class Window:
    """One window driven from client processes: each one's figures (what its `drive` returned), the
    window's seconds as the parent timed it, and the CPU seconds each server and each client process
    used within it."""

    results: list[dict[str, Any]]
    wall_s: float
    server_cpu_s: list[float]
    client_cpu_s: list[float]
    read: dict[str, float]  # what `run`'s `read` gave at the window's close less at its open

    def server_busy(self) -> list[float]:
        """Each server process's share of a core over the window."""
        return [cpu / self.wall_s for cpu in self.server_cpu_s]

    def client_busy(self) -> float:
        """The client processes' CPU over the window, in cores (summed over them)."""
        return sum(self.client_cpu_s) / self.wall_s

    def busy_cells(self) -> list[str]:
        """A row's two cells: each server process's share of a core, and the clients' summed."""
        return [" + ".join(f"{b:.0%}" for b in self.server_busy()), f"{self.client_busy():.0%}"]


def split(total: int, parts: int) -> list[tuple[int, int]]:
    """`total` items (episodes, sandboxes) over at most `parts` processes, as (first, count), none empty."""
    parts = max(1, min(parts, total))
    counts = [total // parts + (i < total % parts) for i in range(parts)]
    return [(sum(counts[:i]), n) for i, n in enumerate(counts)]


def run(drive: Drive, args: Sequence[tuple[Any, ...]], server_pids: Sequence[int],
        read: Callable[[], dict[str, float]] = dict, timeout_s: float = START_TIMEOUT_S) -> Window:
    """`drive(*args[i], gate)` in a spawned process for each `args[i]` (a module-level coroutine
    function, so that it pickles), their windows opened and closed together; the CPU of
    `server_pids` and of the client processes over the window, and what `read` (more figures that
    only grow: other processes' CPU) gained over it. A client that fails, or does not reach the
    window in `timeout_s`, fails the run with its traceback; every client is ended."""
    ctx = multiprocessing.get_context("spawn")
    met, go, released, out = ctx.Barrier(len(args) + 1), ctx.Event(), ctx.Event(), ctx.Queue()
    gate = Gate(met, go, released, timeout_s)
    procs = [ctx.Process(target=_child, args=(drive, a, gate, out), daemon=True) for a in args]
    try:
        for p in procs:
            p.start()
        pids = [p.pid or 0 for p in procs]
        _meet(met, out, timeout_s)
        began = time.perf_counter()  # the wall clock's window holds every reading's
        servers0, clients0, read0 = _cpu(server_pids), _cpu(pids), read()
        go.set()
        _meet(met, out, timeout_s)
        servers1, clients1, read1 = _cpu(server_pids), _cpu(pids), read()
        wall = time.perf_counter() - began
        released.set()
        results = [_result(out, procs, timeout_s) for _ in procs]
        for p in procs:
            p.join(timeout=timeout_s)
            if p.exitcode != 0:
                raise RuntimeError(f"client process {p.pid} exited with {p.exitcode}")
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=10)
    return Window(results, wall, [b - a for a, b in zip(servers0, servers1, strict=True)],
                  [b - a for a, b in zip(clients0, clients1, strict=True)],
                  {k: read1[k] - read0[k] for k in read1})


def _cpu(pids: Sequence[int]) -> list[float]:
    return [server_cpu_s(pid) for pid in pids]


def _meet(met: Barrier, out: Any, timeout_s: float) -> None:
    """The parent's turn at the barrier; a client's failure (it broke the barrier) is raised here."""
    began = time.monotonic()
    try:
        met.wait(timeout=timeout_s)
    except threading.BrokenBarrierError:
        if time.monotonic() - began >= timeout_s:
            raise TimeoutError(f"the client processes did not all meet within {timeout_s} s") from None
        raise RuntimeError(f"a client process failed:\n{_failures(out)}") from None


def _failures(out: Any) -> str:
    """The failed clients' tracebacks on `out`, the cause first (the others broke on the barrier it
    broke), or why there are none."""
    failures = []
    try:
        failures.append(out.get(timeout=10))
        while True:
            failures.append(out.get(timeout=1))
    except queue.Empty:
        pass
    told = sorted((got for kind, got in failures if kind == "failed"),
                  key=lambda got: "BrokenBarrierError" in got)
    return "\n".join(told) or "no client reported a failure (one died without a word)"


def _result(out: Any, procs: list[Any], timeout_s: float) -> dict[str, Any]:
    """The next client's figures; a client's failure, or one dead without a word, is raised."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            kind, got = out.get(timeout=1)
        except queue.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(f"client process {dead[0].pid} died ({dead[0].exitcode})") from None
            continue
        if kind == "failed":
            raise RuntimeError(f"a client process failed:\n{got}")
        return got
    raise TimeoutError(f"no client's figures within {timeout_s} s")
