"""What the cluster clients' routing shares: carrying out an I/O-free flow's requests.

Both clients (the env servers' `agentrl.cluster_client`, the sandbox servers'
`agentrl.sandbox_server.cluster`) write their routing and replay once, as generators that yield each
request they need (read the map, call a holder, wait) and are sent its outcome: the result, or the
error it raised, which the flow judges (a holder gone is replayed elsewhere, anything else raised to
the caller). `drive` and `drive_async` carry the requests out, blocking or awaiting, so that the
sync and async twins of each client share every rule of routing and replay.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

RequestT = TypeVar("RequestT")
T = TypeVar("T")
Outcome = Any  # a request's result, or the exception it raised (one of the driver's `caught`)


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
