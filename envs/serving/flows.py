"""What the cluster clients' routing shares: carrying out an I/O-free flow's requests, and the map.

Both clients (the env servers' `agentrl.client.cluster`, the sandbox servers'
`agentrl.sandbox_server.clients.cluster`) write their routing and replay once, as generators that yield each
request they need (read the map, call a holder, wait) and are sent its outcome: the result, or the
error it raised, which the flow judges (a holder gone is replayed elsewhere, anything else raised to
the caller). `drive` and `drive_async` carry the requests out, blocking or awaiting, so that the
sync and async twins of each client share every rule of routing and replay. `ClientMap` is what
both clients know of the holders between reads of the map, and which of them take new work; its
`read_once` keeps a client's flows to one read of the map at a time (a burst of creates on a fresh
client would otherwise read it once each).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Generic, Protocol, TypeVar

RequestT = TypeVar("RequestT")
T = TypeVar("T")
Outcome = Any  # a request's result, or the exception it raised (one of the driver's `caught`)
LOST_GRACE_S = 2.0  # a holder a client lost takes no new work from it for this long, whatever the map says
READ_POLL_S = 0.01  # how often a flow waiting for another flow's read of the map looks whether it ended


def drive(flow: Generator[RequestT, Outcome, T], do: Callable[[RequestT], Any],
          caught: tuple[type[BaseException], ...]) -> T:
    """Run `flow` to its end: each request it yields done by `do`, the flow sent the result or the
    `caught` error raised; what the flow returns is returned, what it raises raised."""
    try:
        request = next(flow)
        while True:
            try:
                outcome = do(request)
            except caught as exc:
                outcome = exc
            request = flow.send(outcome)
    except StopIteration as done:
        return done.value
    finally:  # a flow left by an error of `do` (a cancel) ends now, its `finally` blocks run
        flow.close()


async def drive_async(flow: Generator[RequestT, Outcome, T], do: Callable[[RequestT], Awaitable[Any]],
                      caught: tuple[type[BaseException], ...]) -> T:
    """`drive`, each request awaited."""
    try:
        request = next(flow)
        while True:
            try:
                outcome = await do(request)
            except caught as exc:
                outcome = exc
            request = flow.send(outcome)
    except StopIteration as done:
        return done.value
    finally:  # a flow left by an error of `do` (a cancel) ends now, its `finally` blocks run
        flow.close()


class HolderEntry(Protocol):
    """What a client reads of each holder in a map (both servers' map entries have it)."""

    @property
    def holder(self) -> str: ...

    @property
    def url(self) -> str: ...

    @property
    def state(self) -> str: ...


EntryT = TypeVar("EntryT", bound=HolderEntry)


class ClientMap(Generic[EntryT]):
    """A cluster client's view of the holders, no I/O: the map as last read (`read_at`), the work
    this client holds on each (`own`, counted when a create is sent, so a burst spreads), and when
    it lost each (`lost_at`). A holder takes new work while the map calls it `up` and this client
    has not lost it in the last `LOST_GRACE_S`, whatever the map says (the map lags a loss)."""

    def __init__(self) -> None:
        self.map: dict[str, EntryT] = {}
        self.read_at = -1e9
        self.own: dict[str, int] = {}
        self.lost_at: dict[str, float] = {}
        self.reading = False  # a flow of this client is reading the map now (`read_once`)
        self.reads = 0  # reads of the map that ended, with the map or with an error (`read_error`)
        self.read_error: Exception | None = None  # what the last read raised, if it did

    def read_once(self, read: Generator[RequestT, Outcome, None], pause: RequestT,
                  wait_s: float) -> Generator[RequestT, Outcome, None]:
        """Run `read` (a flow that reads the map) unless another flow of this client is reading it:
        then wait for that read instead, yielding `pause` (a wait of `READ_POLL_S`) until it ends,
        and end as it did, raising its error where it raised one (as the awaiters of one future
        share its result); read only where the other was cancelled or outlasted `wait_s`. A failed
        read marks nothing: the next call reads again. Without it, creates sent together by a
        fresh client each read the map, since each finds none."""
        deadline = time.monotonic() + wait_s
        ended = self.reads
        while self.reading and time.monotonic() < deadline:
            yield pause
        if self.reads != ended:
            if self.read_error is not None:
                raise self.read_error
            return
        self.reading, self.read_error = True, None
        try:
            yield from read
            self.reads += 1
        except Exception as exc:  # not a cancel (GeneratorExit): the flows waiting for it read instead
            self.read_error, self.reads = exc, self.reads + 1
            raise
        finally:
            self.reading = False

    def usable(self, name: str) -> bool:
        info = self.map.get(name)
        lost = self.lost_at.get(name)
        return (info is not None and info.state == "up"
                and (lost is None or time.monotonic() - lost > LOST_GRACE_S))

    def took(self, name: str) -> None:
        self.own[name] = self.own.get(name, 0) + 1

    def drop(self, name: str) -> None:
        self.own[name] = max(0, self.own.get(name, 0) - 1)

    def states(self) -> str:
        """The map's holders and states, as an error names them."""
        return ", ".join(f"{h.holder}: {h.state}" for h in self.map.values()) or "none"
