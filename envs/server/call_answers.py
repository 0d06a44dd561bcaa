"""What a call answers: its error (`ApiError`, made by the functions below where the env raised),
and its answer remembered by request id (`Remembered`).

Every call that changes an episode (create, reset, step, close, fork), over HTTP or the channel,
is made safe to retry by a `Remembered` table: `once` for a call run in a task, `keep` for one run
right on the event loop. There is one way a retried request is recognised, whatever it asks for.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import TYPE_CHECKING, Any, TypeVar

from agentrl.core import EpisodeOverError
from agentrl.protocol import ErrorCode, encode_error, encode_error_item

if TYPE_CHECKING:
    from agentrl.server.episodes import LiveEpisode

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

    def item(self, episode_id: str | None) -> bytes:
        """This error as the encoded `BatchResult` of an item of a batch or a frame."""
        return encode_error_item(episode_id, self.status, encode_error(self.code, self.message),
                                 self.headers.get("Retry-After"))


# why an episode left the server (`EpisodeRegistry.close`'s reasons), as the error a later call on it
# gets; an episode closed because the server is shutting down is unknown to the next server that is
# asked, and a cluster client replays it there
ENDED = {"client": ErrorCode.EPISODE_CLOSED, "disconnect": ErrorCode.EPISODE_CLOSED,
         "idle": ErrorCode.EPISODE_EXPIRED, "max_age": ErrorCode.EPISODE_EXPIRED}


def ended(episode_id: str, reason: str | None) -> ApiError:
    """The answer to a call on an episode that is no longer live, by why it left (None: unknown)."""
    why = reason or ""
    code = ENDED.get(why, ErrorCode.UNKNOWN_EPISODE)
    if code == ErrorCode.EPISODE_CLOSED:
        return ApiError(404, code, f"episode {episode_id!r} was closed; a closed episode does not come back")
    if code == ErrorCode.EPISODE_EXPIRED:
        return ApiError(404, code, f"episode {episode_id!r} expired ({why.replace('_', ' ')}) "
                        "and was closed by the server")
    return ApiError(404, code, f"no live episode {episode_id!r} (never created here, or its server "
                    "restarted)")


def gone(ep: LiveEpisode) -> ApiError:
    """The answer to a call on an episode closed while the call waited for it."""
    return ended(ep.episode_id, ep.end_reason)


def start_failed(env_id: str, exc: Exception) -> ApiError:
    """The error answered for a create whose env could not be built or reset."""
    return ApiError(400, ErrorCode.ENV_REJECTED, f"{env_id} could not start: {type(exc).__name__}: {exc}")


def reset_failed(exc: Exception) -> ApiError:
    """The error answered for a reset the env refused."""
    return ApiError(400, ErrorCode.ENV_REJECTED, f"reset failed: {type(exc).__name__}: {exc}")


def env_raised(ep: LiveEpisode, exc: Exception, doing: str) -> ApiError:
    """The error answered for a call (`doing`: "stepping", "forking") whose env raised `exc`: a 409
    where the env says the episode is over, else a 500 (a bug in the env)."""
    if isinstance(exc, EpisodeOverError):
        ep.over = True
        return ApiError(409, ErrorCode.EPISODE_OVER, str(exc))
    return env_failed(ep, exc, doing)


def env_failed(ep: LiveEpisode, exc: Exception, doing: str) -> ApiError:
    """The 500 answered for a call whose env raised `exc` where it has no reason to (a bug in the
    env); a call that only reads the episode (its record, its rendering) gets it whatever it raised."""
    message = f"{ep.env_id} raised while {doing}: {type(exc).__name__}: {exc}"
    return ApiError(500, ErrorCode.ENV_ERROR, message)


def _settle(future: asyncio.Future, exc: BaseException) -> None:
    future.set_exception(exc)
    future.exception()  # marks it retrieved: a retry may never come


class Remembered:
    """Answers by request id (the newest `limit` of them): a retry of a key, while the first call
    is under way or after, gets the first call's answer or `ApiError` instead of running again.
    Keys are request ids, or (kind, request id) where calls of several kinds share a table."""

    __slots__ = ("answers", "limit")

    def __init__(self, limit: int) -> None:
        self.answers: OrderedDict[Hashable, asyncio.Future] = OrderedDict()
        self.limit = limit

    def __contains__(self, key: Hashable) -> bool:
        return key in self.answers

    def clear(self) -> None:
        self.answers.clear()

    async def once(self, key: Hashable | None, run: Callable[[], Awaitable[T]]) -> T:
        """`run()`, remembered by `key` (None: not remembered). An answer that says to try again
        later (429, 503) is not kept: the retry it asks for runs the call."""
        if key is None:
            return await run()
        earlier = self.answers.get(key)
        if earlier is not None:
            return await asyncio.shield(earlier)
        future = asyncio.get_running_loop().create_future()
        self._add(key, future)
        try:
            value = await run()
        except ApiError as exc:
            if exc.status in (429, 503):
                self._drop(key, future)
            _settle(future, exc)
            raise
        except BaseException:  # not an answer (a bug, a cancellation): a retry runs the call again
            self._drop(key, future)
            future.cancel()
            raise
        future.set_result(value)
        return value

    def keep(self, key: Hashable | None, value: Any, error: ApiError | None = None) -> None:
        """Remember what a call run at once answered (`value`, or `error`), as `once` does."""
        if key is None:
            return
        done = asyncio.get_running_loop().create_future()
        self._add(key, done)
        if error is not None:
            _settle(done, error)
        else:
            done.set_result(value)

    def _add(self, key: Hashable, future: asyncio.Future) -> None:
        self.answers[key] = future
        while len(self.answers) > self.limit:
            self.answers.popitem(last=False)

    def _drop(self, key: Hashable, future: asyncio.Future) -> None:
        if self.answers.get(key) is future:
            del self.answers[key]
