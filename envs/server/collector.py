"""Garbage collection for a process that keeps many long-lived episodes: short pauses only.

CPython's cycle collector stops the whole process while it scans a generation, so its pauses grow
with what it scans. A server with hundreds of live episodes holds hundreds of thousands of objects,
and every step adds a few more that live as long as the episode (its transcript, its trajectory):
a full collection, or a middle one with large thresholds, then walks all of them while no episode
steps, tens to hundreds of milliseconds at a time, which at hundreds of episodes is what sets the
tail of every step's latency (the pauses measured, before and after: docs/benchmarks.md, runs I to
K of the episode server). Most of those passes are wasted: what has lived through two collections
is episode state that reference counting frees when the episode closes.

So while a process serves (`short_pauses`):
- the objects alive at start-up (modules, classes, caches) are frozen out of every collection;
- the young generations stay small (`YOUNG`, `MIDDLE`), so a collection scans at most about ten
  thousand objects, a pause of milliseconds at most;
- whatever survives a collection of the middle generation is frozen right after it
  (`gc.freeze`, a constant-time list move), so the old generation stays empty and no collection
  ever walks the live episodes.

Reference counting still frees frozen objects as soon as nothing refers to them, and an episode's
state forms no reference cycle, so a closed episode is freed at once (tested). What reference
counting cannot free is a cycle, such as a failed step's error kept for a retry of its request
(the error's traceback holds the frame that holds the error): `serving` runs a full collection
over everything every `SWEEP_EVERY_S`, one pause of the size the old full collections had, rare
enough to leave the latency of all but a handful of steps in ten minutes alone. Leaving
`short_pauses` unfreezes everything, so that ordinary collections see it again.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

YOUNG = 1_000  # allocations (net of frees) between young collections
MIDDLE = 10  # young collections between collections of the middle generation
SWEEP_EVERY_S = 600.0  # between full collections of a serving process
_active = 0  # nested `short_pauses` blocks (several servers in one process, as in tests)
_saved: tuple[int, int, int] | None = None
_lock = threading.Lock()


def _freeze_survivors(phase: str, info: dict[str, Any]) -> None:
    """After each collection of the middle generation, move its survivors out of every later scan."""
    if phase == "stop" and info["generation"] >= 1:
        gc.freeze()


@contextmanager
def short_pauses() -> Iterator[None]:
    """Short collector pauses for as long as the block runs; the previous settings come back after."""
    global _active, _saved
    with _lock:
        if _active == 0:
            _saved = gc.get_threshold()
            gc.collect()
            gc.freeze()
            gc.set_threshold(YOUNG, MIDDLE, _saved[2])
            gc.callbacks.append(_freeze_survivors)
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                gc.callbacks.remove(_freeze_survivors)
                assert _saved is not None
                gc.set_threshold(*_saved)
                gc.unfreeze()


def sweep() -> int:
    """One full collection over everything, frozen objects included; returns the objects freed."""
    gc.unfreeze()
    try:
        return gc.collect()
    finally:
        gc.freeze()


@asynccontextmanager
async def serving(sweep_every_s: float = SWEEP_EVERY_S) -> AsyncIterator[None]:
    """`short_pauses` for a server, with a full collection every `sweep_every_s` on its loop."""
    with short_pauses():
        sweeper = asyncio.get_running_loop().create_task(_sweep_forever(sweep_every_s))
        try:
            yield
        finally:
            sweeper.cancel()


async def _sweep_forever(every_s: float) -> None:
    while True:
        await asyncio.sleep(every_s)
        sweep()
