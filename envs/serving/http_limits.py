"""What a caller can make an agentrl server do before it is authenticated, bounded.

Authentication is the app's business, and the app sees a request only once its head is whole. Until
then uvicorn's parser keeps whatever a connection sends, for as long as the connection stays open:
one connection without a token could send a request line or a header that never ends (each piece
is appended to what came before, so the cost grows with the square of the size, all of it on the
event loop every token holder's step waits on), and a thousand connections that send nothing hold
every file the process may open, so that no client connects at all.

`BoundedHttpToolsProtocol` is uvicorn's httptools protocol (the fast parser the hot path is measured
on) with four bounds, all in `HttpLimits`:

- a head (request line and headers) larger than `max_head_bytes` is answered 414 (the request line
  never ended) or 431 and the connection closed; the bytes are counted before the app is involved,
  so the work done for a head is linear in what was read and stops at the limit;
- a head must arrive whole within `head_timeout_s` of the connection opening or of its first byte,
  else 408 (a connection that sends nothing is a head that never comes);
- a body, and a response its caller does not read, may stall at most `stall_timeout_s`;
- at most `max_connections` connections: past it, the connection that the server owes nothing (no
  request of it under way) and that has waited longest is closed, those that never completed a
  request first, with a 503 where it was not idle between requests; only when every connection is
  owed a response is the newcomer refused with a 503. A flood of connections that send nothing or
  half a head thus makes room for a token holder instead of keeping it out.

`open_files_limit` raises the process's soft limit on open files to the hard one at start, since
each connection is a file: the default connection limit is half of what it allows.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState

__all__ = ["BoundedHttpToolsProtocol", "HttpLimits", "LimitedConfig", "open_files_limit"]

LOG = logging.getLogger("uvicorn.error")

MAX_CONNECTIONS_CAP = 10_000
"""The most connections a server holds by default, however many files the host allows: what many
trainer processes with full connection pools need, at a few KiB of memory each."""

ENV_VARS = {
    "max_head_bytes": "AGENTRL_HTTP_MAX_HEAD_BYTES",
    "head_timeout_s": "AGENTRL_HTTP_HEAD_TIMEOUT_S",
    "stall_timeout_s": "AGENTRL_HTTP_STALL_TIMEOUT_S",
    "max_connections": "AGENTRL_HTTP_MAX_CONNECTIONS",
}
"""The environment variables that set each bound, for every server agentrl starts (its workers,
started as child processes, inherit them)."""


@dataclass(frozen=True)
class HttpLimits:
    """The bounds every connection keeps before (and apart from) authentication."""

    max_head_bytes: int = 64 * 1024
    """Request line and headers together: a bearer token and agentrl's headers take well under 1 KiB."""
    head_timeout_s: float = 10.0
    """From a connection's opening, or a request's first byte, to the end of its head."""
    stall_timeout_s: float = 30.0
    """How long a body may send nothing while the server reads, or a caller leave a response unread."""
    max_connections: int | None = None
    """Connections held at once; None: half the open-files limit, at most `MAX_CONNECTIONS_CAP`."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> HttpLimits:
        """The defaults, with each one that `environ` sets (`ENV_VARS`) in its place."""
        given: dict[str, Any] = {}
        for field, name in ENV_VARS.items():
            text = environ.get(name, "").strip()
            if not text:
                continue
            number = _number(name, text, integer=field in ("max_head_bytes", "max_connections"))
            given[field] = number
        return cls(**given)

    def fitted_to(self, open_files: int) -> HttpLimits:
        """These limits with `max_connections` settled for a process allowed `open_files` files."""
        if self.max_connections is not None:
            return self
        return replace(self, max_connections=min(MAX_CONNECTIONS_CAP, max(16, open_files // 2)))


def _number(name: str, text: str, *, integer: bool) -> float:
    try:
        number = int(text) if integer else float(text)
    except ValueError:
        number = -1
    if not number > 0 or not math.isfinite(number):
        kind = "a whole number" if integer else "a number of seconds"
        raise ValueError(f"{name} must be {kind} above 0, not {text!r}")
    return number


class LimitedConfig(uvicorn.Config):
    """uvicorn's config serving with `BoundedHttpToolsProtocol` under `limits`."""

    def __init__(self, app: Any, *, limits: HttpLimits, **options: Any) -> None:
        if limits.max_connections is None:
            raise ValueError("settle max_connections first (HttpLimits.fitted_to)")
        super().__init__(app, http=BoundedHttpToolsProtocol, **options)
        self.limits = limits


def open_files_limit() -> tuple[int, int]:
    """Raise this process's soft limit on open files as far as the host allows; return (before,
    after). Each connection is a file: a soft limit left at a common 1,024 lets a few hundred idle
    connections refuse every other one."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return soft, soft
    wanted = hard if hard != resource.RLIM_INFINITY else 1 << 20
    for target in (wanted, 10_240):  # 10,240: macOS's OPEN_MAX, where an unlimited hard limit is not
        if target <= soft:
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            continue
        return soft, target
    return soft, soft


class _Waiting:
    """The connections of one server that it owes nothing, each group oldest first: the ones to
    close when a newcomer needs room. Those that never completed a request go first: a client that
    connects sends its request at once, so a connection with none to show has been silent or slow."""

    def __init__(self) -> None:
        self.never_served: dict[BoundedHttpToolsProtocol, None] = {}
        self.served: dict[BoundedHttpToolsProtocol, None] = {}
        self.warned_at = -math.inf

    def forget(self, connection: BoundedHttpToolsProtocol) -> None:
        self.never_served.pop(connection, None)
        self.served.pop(connection, None)

    def mark_served(self, connection: BoundedHttpToolsProtocol) -> None:
        self.served.pop(connection, None)
        self.served[connection] = None

    def evict_oldest(self, limit: int, now: float) -> bool:
        """Close the connection that has waited longest; False when every one is owed a response."""
        if now - self.warned_at > 10.0:
            self.warned_at = now
            LOG.warning("%d connections, the limit (AGENTRL_HTTP_MAX_CONNECTIONS): closing the ones "
                        "waiting longest to make room for new ones", limit)
        for group in (self.never_served, self.served):
            if group:
                connection = next(iter(group))
                del group[connection]
                connection.evict()
                return True
        return False


_WAITING: weakref.WeakKeyDictionary[ServerState, _Waiting] = weakref.WeakKeyDictionary()


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol that bounds a head's size and time, a body's and a response's
    stalls, and the connections held (the module's docstring says how and why)."""

    def __init__(self, config: uvicorn.Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        # under a plain uvicorn.Config (which `agentrl.serving.runner` never builds): the defaults
        self.limits = config.limits if isinstance(config, LimitedConfig) else HttpLimits().fitted_to(1024)
        self.waiting = _WAITING.setdefault(server_state, _Waiting())
        self.head_bytes: int | None = 0
        """Bytes of the head under way (0: none begun); None from a head's end to its message's."""
        self.line_ended = False
        self.served = False
        self.upgraded = False
        """Handed to a WebSocket protocol: the transport is no longer this one's to time or close."""
        self.head_timer: asyncio.TimerHandle | None = None
        self.body_timer: asyncio.TimerHandle | None = None
        self.write_timer: asyncio.TimerHandle | None = None
        self.body_seen_at = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        limit = self.limits.max_connections or 0
        if len(self.connections) > limit and not self.waiting.evict_oldest(limit, self.loop.time()):
            self.answer_and_close(503, "too many connections: try again later")
            return
        self.waiting.never_served[self] = None
        self.head_timer = self.loop.call_later(self.limits.head_timeout_s, self.head_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.waiting.forget(self)
        self.cancel_timers()

    def data_received(self, data: bytes) -> None:
        # a closed transport reads no more: nothing is parsed past an answer that closed it
        if self.head_bytes is not None:
            self.head_bytes += len(data)
            self.line_ended = self.line_ended or b"\n" in data
        else:
            self.body_seen_at = self.loop.time()
        super().data_received(data)
        # the hot path, a whole request in one piece, ends here: its head and body are done
        if self.head_bytes:  # a head under way after this piece: the parser holds all of it
            if self.transport.is_closing():
                return
            if self.head_bytes > self.limits.max_head_bytes:
                status, what = (431, "request headers") if self.line_ended else (414, "request line")
                self.answer_and_close(status, f"{what} over {self.limits.max_head_bytes} bytes")
            elif self.head_timer is None:
                self.head_timer = self.loop.call_later(self.limits.head_timeout_s, self.head_timed_out)
        elif (self.head_bytes is None and self.body_timer is None and not self.upgraded
              and not self.transport.is_closing()):
            self.body_seen_at = self.loop.time()
            self.body_timer = self.loop.call_later(self.limits.stall_timeout_s, self.body_stalled)

    def on_headers_complete(self) -> None:
        self.head_bytes = None
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None
        self.waiting.forget(self)  # owed a response now
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self.head_bytes, self.line_ended = 0, False
        if self.body_timer is not None:
            self.body_timer.cancel()
            self.body_timer = None
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.timeout_keep_alive_task is not None:  # idle: no request of it under way or queued
            self.served = True
            self.waiting.mark_served(self)

    def handle_websocket_upgrade(self) -> None:
        self.head_bytes, self.upgraded = None, True
        self.waiting.forget(self)
        self.cancel_timers()
        super().handle_websocket_upgrade()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self.write_timer is None:
            self.write_timer = self.loop.call_later(self.limits.stall_timeout_s, self.transport.abort)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self.write_timer is not None:
            self.write_timer.cancel()
            self.write_timer = None

    def head_timed_out(self) -> None:
        self.head_timer = None
        if not self.transport.is_closing():
            self.answer_and_close(408, f"request head not complete within {self.limits.head_timeout_s:g} s")

    def body_stalled(self) -> None:
        """Close the connection if its body sent nothing for `stall_timeout_s` while the server read;
        a pause is not the caller's while the app has not taken what came (flow control), nor while
        the caller waits for the app's `100 Continue`."""
        now = self.loop.time()
        cycle = self.cycle
        if self.flow.read_paused or (cycle is not None and cycle.waiting_for_100_continue):
            self.body_seen_at = now
        waited = now - self.body_seen_at
        if waited < self.limits.stall_timeout_s:
            self.body_timer = self.loop.call_later(self.limits.stall_timeout_s - waited, self.body_stalled)
            return
        self.body_timer = None
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app's receive() reads a disconnect, its send() writes nothing
            cycle.message_event.set()
            if not cycle.response_started:
                self.answer_and_close(408, f"request body stalled for {self.limits.stall_timeout_s:g} s")
                return
        self.transport.close()

    def evict(self) -> None:
        """Make room for a newcomer: an idle connection between requests is closed as the keep-alive
        timer would close it; one silent or halfway through a head is told why."""
        if self.served and not self.head_bytes:  # between requests, or after an early answer
            self.transport.close()
        else:
            self.answer_and_close(503, "too many connections: try again later")

    def answer_and_close(self, status: int, message: str) -> None:
        """Answer `status` with `message` (a request the app never sees) and close the connection."""
        if self.transport.is_closing():  # closing already (uvicorn's own 400, a timer): no word more
            self.waiting.forget(self)
            return
        body = message.encode("ascii")
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head.extend([name, b": ", value, b"\r\n"])
        head.append(b"content-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n"
                    b"connection: close\r\n\r\n" % len(body))
        self.transport.write(b"".join(head) + body)
        self.transport.close()
        self.waiting.forget(self)
        self.cancel_timers()

    def cancel_timers(self) -> None:
        for timer in (self.head_timer, self.body_timer, self.write_timer):
            if timer is not None:
                timer.cancel()
        self.head_timer = self.body_timer = self.write_timer = None
