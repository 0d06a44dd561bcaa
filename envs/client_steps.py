"""The clients' step channel: steps over one persistent WebSocket to `/v1/ws` (see `agentrl.server.mux`).

An HTTP request per step pays for a request head, routing and a response head on both sides, which
costs more than a light env's step. Here a connection stays open and each message carries a frame
of steps. The async channel coalesces: every step its coroutines ask for while a loop iteration
runs leaves in one frame, and while `max_frames` frames are in flight, new steps wait and leave
together with the next, so 512 concurrent episodes cost the server a few messages per round
instead of 512 requests. The sync channel keeps one connection per thread using it at once.

Both return an `Answer` per step, exactly as the HTTP transport does, and fail with httpx's
transport errors (`ConnectError`, `ReadError`, `ReadTimeout`), so the clients' one retry policy
and their typed errors apply unchanged whichever way a call travels.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from dataclasses import dataclass
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection as AsyncConnection
from websockets.asyncio.client import connect as async_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import ClientConnection as SyncConnection
from websockets.sync.client import connect as sync_connect

from agentrl.server.wire import MAX_BATCH, MUX_PATH, dumps, loads


@dataclass(frozen=True)
class Answer:
    """What the server said to one call: its status, its JSON body, and any `Retry-After`."""

    status: int
    body: Any
    retry_after: float | None = None


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
    return [Answer(r["status"], r["result"] if r["status"] == 200 else r["error"]) for r in results]


_OPEN_FAILURES = (OSError, InvalidHandshake, TimeoutError)


def _refused(exc: InvalidStatus) -> Answer:
    """The server's HTTP answer to a refused handshake (a 401, say), read as any other answer."""
    response = exc.response
    try:
        body = loads(response.body or b"")
    except ValueError:
        body = (response.body or b"").decode(errors="replace")
    after = response.headers.get("Retry-After", "")
    return Answer(response.status_code, body, float(after) if after.isdigit() else None)
_LOST = (ConnectionClosed, OSError)


def _options(headers: dict[str, str], timeout: float, max_size: int) -> dict[str, Any]:
    # no compression (small hot messages), no proxy (the episode server is addressed directly),
    # pings kept so that a dead peer is noticed
    return {"additional_headers": headers, "open_timeout": timeout, "max_size": max_size,
            "compression": None, "proxy": None, "user_agent_header": "agentrl"}


class SyncSteps:
    """Steps from threads: each call borrows an idle connection (or opens one) and returns it."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float, max_size: int) -> None:
        self.url = socket_url(base_url)
        self.timeout = timeout
        self.options = _options(headers, timeout, max_size)
        self._idle: list[SyncConnection] = []
        self._lock = threading.Lock()

    def send(self, item: dict[str, Any]) -> Answer:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            try:
                conn = sync_connect(self.url, legacy=True, **self.options)
            except InvalidStatus as exc:
                return _refused(exc)
            except _OPEN_FAILURES as exc:
                raise httpx.ConnectError(f"cannot open {self.url}: {exc}") from exc
        try:
            conn.send(dumps({"id": 0, "steps": [item]}))
            reply = conn.recv(timeout=self.timeout)
        except TimeoutError as exc:
            conn.close()
            raise httpx.ReadTimeout(f"no answer from {self.url} in {self.timeout} s") from exc
        except _LOST as exc:
            conn.close()
            raise httpx.ReadError(f"connection to {self.url} lost: {exc}") from exc
        with self._lock:
            self._idle.append(conn)
        return _answers(loads(reply), 1)[0]

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class AsyncSteps:
    """Steps from coroutines, coalesced into frames over one connection (opened on first use)."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float, max_size: int,
                 max_frames: int = 4) -> None:
        self.url = socket_url(base_url)
        self.timeout = timeout
        self.max_frames = max_frames
        self.options = _options(headers, timeout, max_size)
        self._pending: list[tuple[dict[str, Any], asyncio.Future]] = []
        self._in_flight: dict[int, tuple[list[asyncio.Future], asyncio.TimerHandle]] = {}
        self._ids = itertools.count()
        self._conn: AsyncConnection | None = None
        self._wake: asyncio.Event | None = None
        self._writer: asyncio.Task | None = None
        self._reader: asyncio.Task | None = None

    async def send(self, item: dict[str, Any]) -> Answer:
        future = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if self._writer is None or self._writer.done():
            self._wake = asyncio.Event()
            self._writer = asyncio.get_running_loop().create_task(self._write())
        assert self._wake is not None
        self._wake.set()
        return await future

    async def _write(self) -> None:
        """Send what is pending, a frame at a time, while fewer than `max_frames` are in flight."""
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending and len(self._in_flight) < self.max_frames:
                conn = self._conn or await self._open()
                if conn is None:
                    break
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                frame_id = next(self._ids)
                timer = asyncio.get_running_loop().call_later(self.timeout, self._expire, frame_id)
                self._in_flight[frame_id] = ([future for _, future in batch], timer)
                try:
                    await conn.send(dumps({"id": frame_id, "steps": [item for item, _ in batch]}))
                except _LOST as exc:
                    self._lost(conn, exc)

    async def _open(self) -> AsyncConnection | None:
        try:
            self._conn = await async_connect(self.url, **self.options)
        except _OPEN_FAILURES as exc:
            pending, self._pending = self._pending, []
            refusal = _refused(exc) if isinstance(exc, InvalidStatus) else None
            for _, future in pending:
                if future.done():
                    continue
                if refusal is not None:
                    future.set_result(refusal)
                else:
                    future.set_exception(httpx.ConnectError(f"cannot open {self.url}: {exc}"))
            return None
        self._reader = asyncio.get_running_loop().create_task(self._read(self._conn))
        return self._conn

    async def _read(self, conn: AsyncConnection) -> None:
        try:
            async for message in conn:
                frame = loads(message)
                waiting = self._in_flight.pop(frame.get("id"), None)
                if waiting is None:  # expired meanwhile, or a refusal without an id
                    continue
                futures, timer = waiting
                timer.cancel()
                for future, answer in zip(futures, _answers(frame, len(futures)), strict=True):
                    if not future.done():
                        future.set_result(answer)
                if self._pending and self._wake is not None:
                    self._wake.set()
            self._lost(conn, ConnectionError("closed by the server"))
        except Exception as exc:  # lost, or a reply that is not JSON: either way this connection is done
            self._lost(conn, exc)
            await conn.close()

    def _lost(self, conn: AsyncConnection, exc: BaseException) -> None:
        """Fail every step in flight on `conn` (their retries carry the same request ids)."""
        if self._conn is not conn:
            return
        self._conn = None
        in_flight, self._in_flight = self._in_flight, {}
        error = httpx.ReadError(f"connection to {self.url} lost: {exc}")
        for futures, timer in in_flight.values():
            timer.cancel()
            _fail(futures, error)
        if self._pending and self._wake is not None:
            self._wake.set()

    def _expire(self, frame_id: int) -> None:
        waiting = self._in_flight.pop(frame_id, None)
        if waiting is not None:
            _fail(waiting[0], httpx.ReadTimeout(f"no answer from {self.url} in {self.timeout} s"))
            if self._pending and self._wake is not None:
                self._wake.set()

    async def aclose(self) -> None:
        for task in (self._writer, self._reader):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()
        error = httpx.ReadError("the client was closed")
        _fail([future for _, future in self._pending], error)
        for futures, timer in self._in_flight.values():
            timer.cancel()
            _fail(futures, error)
        self._pending, self._in_flight = [], {}


def _fail(futures: list[asyncio.Future], error: Exception) -> None:
    for future in futures:
        if not future.done():
            future.set_exception(error)
