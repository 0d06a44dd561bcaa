"""What a call answers: its error (`ApiError`), its answer remembered by request id (`once`), and
its encoded item in a batch or a `/v1/ws` frame (`result_item`).

Every call that changes an episode (create, reset, step, close, fork), over HTTP or the channel,
is made safe to retry by `once` (or, for a call run right on the event loop, `remember_outcome`):
there is one way a retried request is recognised, whatever it asks for.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

from agentrl.server.wire import dumps

T = TypeVar("T")


class ApiError(Exception):
    """An error answered to the client with `status` and the `ErrorBody` shape."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}

    def body(self) -> dict[str, str]:
        return {"error": self.code, "message": self.message}


def _settle(future: asyncio.Future, exc: BaseException) -> None:
    future.set_exception(exc)
    future.exception()  # marks it retrieved: a retry may never come


async def once(table: OrderedDict, key: Hashable | None, limit: int, run: Callable[[], Awaitable[T]]) -> T:
    """`run()`, remembered in `table` by `key` (a request id): a retry of the key, while the first
    run is under way or after, gets the first run's answer or `ApiError` instead of running again.
    The one way every call that changes an episode (create, reset, step, close, fork) is made safe
    to retry; `remember_outcome` is its twin for calls run right on the loop. An answer that says
    to try again later (429, 503) is not kept: the retry it asks for runs the call."""
    if key is None:
        return await run()
    earlier = table.get(key)
    if earlier is not None:
        return await asyncio.shield(earlier)
    future = asyncio.get_running_loop().create_future()
    remember(table, key, future, limit)
    try:
        value = await run()
    except ApiError as exc:
        if exc.status in (429, 503) and table.get(key) is future:
            del table[key]
        _settle(future, exc)
        raise
    except BaseException:  # not an answer (a bug, a cancellation): a retry runs the call again
        if table.get(key) is future:
            del table[key]
        future.cancel()
        raise
    future.set_result(value)
    return value


def remember_outcome(table: OrderedDict, key: Hashable | None, limit: int, value: Any,
                     error: ApiError | None = None) -> None:
    """Remember what a call run at once answered (`value`, or `error`), as `once` does."""
    if key is None:
        return
    done = asyncio.get_running_loop().create_future()
    remember(table, key, done, limit)
    if error is not None:
        _settle(done, error)
    else:
        done.set_result(value)


def remember(table: OrderedDict, key: str, future: asyncio.Future, limit: int) -> None:
    """Keep `future` as the answer to a retry of `key`, forgetting the oldest beyond `limit`."""
    table[key] = future
    while len(table) > limit:
        table.popitem(last=False)


def item_head(episode_id: str | None) -> bytes:
    """The start of an encoded `BatchResult`, up to its episode id."""
    return b'{"episode_id":' + dumps(episode_id)


def result_item(episode_id: str, status: int, body: bytes) -> bytes:
    """The encoded `BatchResult` of an item answered with `body` (already encoded)."""
    return item_head(episode_id) + b',"status":%d,"result":%s,"error":null}' % (status, body)
