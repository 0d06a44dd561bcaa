"""The clients' step channel: steps, creates, resets, closes and forks over one persistent WebSocket
to `/v1/ws` (served by `agentrl.server.step_socket`; the frames are `agentrl.protocol`'s).

An HTTP request per step pays for a request head, routing and a response head on both sides, which
costs more than a light env's step, and an episode of a few steps costs a create and a close
besides. Here a connection stays open and each message carries a frame of such calls (steps, for
short, below). The async channel coalesces: the steps its coroutines ask for while a loop iteration
runs leave together, split over at most `max_frames` frames in flight (so that the server steps
one while the next travels), and while that many are in flight, new steps wait and leave with
the next, so 512 concurrent episodes cost the server a few messages per round instead of 512
requests. The sync channel keeps one connection per thread using it at once.

The WebSocket itself is websockets' sans-I/O `ClientProtocol`, driven by a plain socket (sync) or
an asyncio protocol (async): no reader thread or task, no queue between the socket and the caller.
Both return an `Answer` per step, exactly as the HTTP transport does, and fail with httpx's
transport errors (`ConnectError`, `ReadError`, `ReadTimeout`), so the clients' one retry policy
and their typed errors apply unchanged whichever way a call travels.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import ssl
import threading
from typing import Any, cast

import httpx
from websockets.client import ClientProtocol
from websockets.exceptions import InvalidHandshake, InvalidStatus
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.protocol import State
from websockets.uri import parse_uri

from agentrl.protocol import MAX_BATCH, MUX_PATH, Answer, dumps, loads, read_item

_DATA = (Opcode.TEXT, Opcode.BINARY, Opcode.CONT)
MIN_FRAME = 8


def socket_url(base_url: str) -> str:
    """The `/v1/ws` URL under an http(s) base URL."""
    base = base_url.rstrip("/")
    scheme, sep, rest = base.partition("://")
    if not sep or scheme not in ("http", "https"):
        raise ValueError(f"base_url must start with http:// or https://, not {base_url!r}")
    return ("wss://" if scheme == "https" else "ws://") + rest + MUX_PATH


def _answers(frame: dict[str, Any], size: int) -> list[Answer]:
    """One `Answer` per step of a reply frame (a refused frame answers each of its steps alike)."""
    results = frame.get("results")
    if results is None:
        refusal = Answer(int(frame.get("status", 400)), frame.get("error"))
        return [refusal] * size
    return [read_item(r) for r in results]


def _refused(exc: InvalidStatus) -> Answer:
    """The server's HTTP answer to a refused handshake (a 401, say), read as any other answer."""
    response = exc.response
    try:
        body = loads(response.body or b"")
    except ValueError:
        body = (response.body or b"").decode(errors="replace")
    after = response.headers.get("Retry-After", "")
    return Answer(response.status_code, body, float(after) if after.isdigit() else None)


class ConnectionLost(Exception):
    """The WebSocket closed, or the server broke the protocol."""


class _Link:
    """One connection's WebSocket state, no I/O: bytes in, whole messages out, bytes to send."""

    def __init__(self, url: str, headers: dict[str, str], max_size: int) -> None:
        self.uri = parse_uri(url)
        self.protocol = ClientProtocol(self.uri, max_size=max_size)
        request = self.protocol.connect()
        request.headers["User-Agent"] = "agentrl"
        for name, value in headers.items():
            request.headers[name] = value
        self.protocol.send_request(request)
        self.open = False
        self._parts: list[bytes] = []

    def outgoing(self) -> bytes:
        return b"".join(self.protocol.data_to_send())

    def message(self, payload: bytes) -> bytes:
        """The bytes that send `payload` as one binary message."""
        self.protocol.send_binary(payload)
        return self.outgoing()

    def feed(self, data: bytes) -> list[bytes]:
        """Take bytes read from the socket (b"" at its end); return the messages they complete.
        Raises `InvalidHandshake` if the server refused the connection, `ConnectionLost` once it
        is closed. Pings are answered in `outgoing()`, which the caller sends after each feed."""
        if data:
            self.protocol.receive_data(data)
        else:
            self.protocol.receive_eof()
        messages = []
        for event in self.protocol.events_received():
            if isinstance(event, Response):
                if self.protocol.handshake_exc is not None:
                    raise self.protocol.handshake_exc
                self.open = True
            elif isinstance(event, Frame) and event.opcode in _DATA:  # (a Request: a server's event)
                self._parts.append(cast(bytes, event.data))  # a received frame's payload: bytes
                if event.fin:
                    messages.append(self._parts[0] if len(self._parts) == 1 else b"".join(self._parts))
                    self._parts = []
        if self.protocol.state in (State.CLOSING, State.CLOSED) or not data:
            if messages:  # hand these over first; the next feed reports the close
                return messages
            raise ConnectionLost(str(self.protocol.close_exc) if self.protocol.state is State.CLOSED
                                 else "the server closed the connection")
        return messages


_OPEN_FAILURES = (OSError, InvalidHandshake, TimeoutError, asyncio.TimeoutError, ConnectionLost)


class _SyncConnection:
    """A WebSocket over a blocking socket, one request at a time."""

    def __init__(self, url: str, headers: dict[str, str], timeout: float, max_size: int) -> None:
        self.link = _Link(url, headers, max_size)
        uri = self.link.uri
        self.sock = socket.create_connection((uri.host, uri.port), timeout=timeout)
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if uri.secure:
                self.sock = ssl.create_default_context().wrap_socket(self.sock, server_hostname=uri.host)
            self.sock.sendall(self.link.outgoing())
            while not self.link.open:
                self._read()
        except BaseException:
            self.sock.close()
            raise

    def _read(self) -> list[bytes]:
        messages = self.link.feed(self.sock.recv(1 << 16))
        reply = self.link.outgoing()
        if reply:
            self.sock.sendall(reply)
        return messages

    def request(self, payload: bytes) -> bytes:
        self.sock.sendall(self.link.message(payload))
        while True:
            messages = self._read()
            if messages:
                return messages[-1]

    def close(self) -> None:
        self.sock.close()


class SyncSteps:
    """Steps from threads: each call borrows an idle connection (or opens one) and returns it."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float, max_size: int) -> None:
        self.url = socket_url(base_url)
        self.headers, self.timeout, self.max_size = headers, timeout, max_size
        self._idle: list[_SyncConnection] = []
        self._lock = threading.Lock()

    def send(self, item: dict[str, Any]) -> Answer:
        return self.send_frame([item])[0]

    def send_frame(self, items: list[dict[str, Any]]) -> list[Answer]:
        """An `Answer` per item, the items sent in one frame (a frame's items of one episode run in
        their order)."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            try:
                conn = _SyncConnection(self.url, self.headers, self.timeout, self.max_size)
            except InvalidStatus as exc:
                return [_refused(exc)] * len(items)
            except _OPEN_FAILURES as exc:
                raise httpx.ConnectError(f"cannot open {self.url}: {exc}") from exc
        try:
            reply = conn.request(dumps({"id": 0, "steps": items}))
        except TimeoutError as exc:
            conn.close()
            raise httpx.ReadTimeout(f"no answer from {self.url} in {self.timeout} s") from exc
        except (ConnectionLost, OSError) as exc:
            conn.close()
            raise httpx.ReadError(f"connection to {self.url} lost: {exc}") from exc
        with self._lock:
            self._idle.append(conn)
        return _answers(loads(reply), len(items))

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class _AsyncConnection(asyncio.Protocol):
    """A WebSocket on an asyncio transport: messages go to `steps` as they are read."""

    def __init__(self, link: _Link, steps: AsyncSteps) -> None:
        self.link, self.steps = link, steps
        self.opened: asyncio.Future = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream connection: a Transport
        transport.write(self.link.outgoing())  # type: ignore[attr-defined]  # as above

    def data_received(self, data: bytes) -> None:
        self._take(data)

    def eof_received(self) -> bool | None:
        self._take(b"")
        return None

    def _take(self, data: bytes) -> None:
        try:
            messages = self.link.feed(data)
        except Exception as exc:  # refused, closed, or not WebSocket: this connection is done
            self._end(exc)
            return
        reply = self.link.outgoing()
        if reply and self.transport is not None:
            self.transport.write(reply)
        if self.link.open and not self.opened.done():
            self.opened.set_result(None)
        for message in messages:
            self.steps._received(self, message)

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc or ConnectionLost("the connection closed"))

    def _end(self, exc: BaseException) -> None:
        if not self.opened.done():
            self.opened.set_exception(exc)
        self.steps._lost(self, exc)
        if self.transport is not None:
            self.transport.close()

    def send(self, payload: bytes) -> None:
        assert self.transport is not None
        self.transport.write(self.link.message(payload))


class AsyncSteps:
    """Steps from coroutines, coalesced into frames over one connection (opened on first use)."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float, max_size: int,
                 max_frames: int = 4) -> None:
        self.url = socket_url(base_url)
        self.headers, self.timeout, self.max_size = headers, timeout, max_size
        self.max_frames = max_frames
        self._pending: list[tuple[dict[str, Any], asyncio.Future]] = []
        self._whole: list[tuple[list[dict[str, Any]], list[asyncio.Future]]] = []  # frames kept whole
        self._in_flight: dict[int, tuple[list[asyncio.Future], asyncio.TimerHandle]] = {}
        self._ids = itertools.count()
        self._conn: _AsyncConnection | None = None
        self._opening: asyncio.Task | None = None
        self._scheduled = False

    async def send(self, item: dict[str, Any]) -> Answer:
        future = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        self._schedule()
        return await future

    async def send_frame(self, items: list[dict[str, Any]]) -> list[Answer]:
        """An `Answer` per item, the items sent together in a frame of their own, never split or
        joined with other steps: a frame's items of one episode run in their order."""
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in items]
        self._whole.append((items, futures))
        self._schedule()
        return list(await asyncio.gather(*futures))

    def _schedule(self) -> None:
        if not self._scheduled:  # the flush runs after every step asked for in this iteration
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Send what is pending, a frame at a time, while fewer than `max_frames` are in flight."""
        self._scheduled = False
        if self._conn is None:
            if (self._pending or self._whole) and (self._opening is None or self._opening.done()):
                self._opening = asyncio.get_running_loop().create_task(self._open())
            return
        while (self._pending or self._whole) and len(self._in_flight) < self.max_frames:
            if self._whole:
                items, futures = self._whole.pop(0)
            else:
                # split what is pending over the free frames, so that the server steps one frame while
                # the client sends the next (frames of at least MIN_FRAME steps: each costs a message)
                free = self.max_frames - len(self._in_flight)
                size = min(MAX_BATCH, max(MIN_FRAME, -(-len(self._pending) // free)))
                batch, self._pending = self._pending[:size], self._pending[size:]
                items, futures = [item for item, _ in batch], [future for _, future in batch]
            frame_id = next(self._ids)
            timer = asyncio.get_running_loop().call_later(self.timeout, self._expire, frame_id)
            self._in_flight[frame_id] = (futures, timer)
            self._conn.send(dumps({"id": frame_id, "steps": items}))

    async def _open(self) -> None:
        link = _Link(self.url, self.headers, self.max_size)
        made: list[_AsyncConnection] = []
        try:
            conn = await asyncio.wait_for(self._connect(link, made), self.timeout)
        except _OPEN_FAILURES as exc:
            for half_open in made:
                if half_open.transport is not None:
                    half_open.transport.close()
            refusal = _refused(exc) if isinstance(exc, InvalidStatus) else None
            for future in self._unsent():
                if future.done():
                    continue
                if refusal is not None:
                    future.set_result(refusal)
                else:
                    future.set_exception(httpx.ConnectError(f"cannot open {self.url}: {exc}"))
            return
        self._conn = conn
        self._flush()

    async def _connect(self, link: _Link, made: list[_AsyncConnection]) -> _AsyncConnection:
        def protocol() -> _AsyncConnection:
            made.append(_AsyncConnection(link, self))
            return made[-1]

        uri = link.uri
        _, conn = await asyncio.get_running_loop().create_connection(
            protocol, uri.host, uri.port, ssl=ssl.create_default_context() if uri.secure else None)
        await conn.opened
        return conn

    def _received(self, conn: _AsyncConnection, message: bytes) -> None:
        try:
            frame = loads(message)
            waiting = self._in_flight.pop(frame.get("id"), None)
        except (ValueError, AttributeError) as exc:
            conn._end(ConnectionLost(f"not a reply frame: {exc}"))
            return
        if waiting is None:  # expired meanwhile, or a refusal without an id
            return
        futures, timer = waiting
        timer.cancel()
        for future, answer in zip(futures, _answers(frame, len(futures)), strict=True):
            if not future.done():
                future.set_result(answer)
        if self._pending or self._whole:
            self._flush()

    def _lost(self, conn: _AsyncConnection, exc: BaseException) -> None:
        """Fail every step in flight on `conn` (their retries carry the same request ids)."""
        if self._conn is not conn:
            return
        self._conn = None
        in_flight, self._in_flight = self._in_flight, {}
        error = httpx.ReadError(f"connection to {self.url} lost: {exc}")
        for futures, timer in in_flight.values():
            timer.cancel()
            _fail(futures, error)
        if self._pending or self._whole:
            self._flush()

    def _expire(self, frame_id: int) -> None:
        waiting = self._in_flight.pop(frame_id, None)
        if waiting is not None:
            _fail(waiting[0], httpx.ReadTimeout(f"no answer from {self.url} in {self.timeout} s"))
            if self._pending or self._whole:
                self._flush()

    async def aclose(self) -> None:
        if self._opening is not None and not self._opening.done():
            self._opening.cancel()
        conn, self._conn = self._conn, None
        if conn is not None and conn.transport is not None:
            conn.transport.close()
        error = httpx.ReadError("the client was closed")
        _fail(self._unsent(), error)
        for futures, timer in self._in_flight.values():
            timer.cancel()
            _fail(futures, error)
        self._in_flight = {}

    def _unsent(self) -> list[asyncio.Future]:
        """The futures of every step not sent yet, taken out of the queues."""
        futures = [future for _, future in self._pending]
        futures += [future for _, whole in self._whole for future in whole]
        self._pending, self._whole = [], []
        return futures


def _fail(futures: list[asyncio.Future], error: Exception) -> None:
    for future in futures:
        if not future.done():
            future.set_exception(error)
