"""Talking to the in-sandbox agent: length-prefixed JSON frames, each reply matched to its request.

The host trusts nothing a container sends: a reply must carry its request's unguessable id and stay
under a size fixed by the request, or the sandbox is marked dead (`SandboxDead`, HTTP 410) with the
reason; no buffer outlives the reply it held, so memory stays bounded whatever a container prints.

A call is made from a thread (`AgentLink.call`, blocking) or from the event loop (`AgentLink.acall`,
which the server's exec route uses: no worker thread to wake and to wake the loop back, about a
tenth of a millisecond per exec); both frame, check and fail alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import secrets
import select
import socket
import struct
import subprocess
import threading
import time
from collections import deque
from typing import Any, Protocol

import anyio

from agentrl.sandbox_server.wire.errors import DiskFull, InvalidRequest, SandboxDead, SandboxError

HEADER = struct.Struct(">I")
MAX_STREAM_FRAME = 1 << 24  # Docker cuts a container's output into frames far smaller than this
LOCK_POLL_S = 0.001  # how often `acall` retries a lock a thread holds (a call from a thread: rare)
CLOSED_CHECK_S = 1.0  # how often `acall`, waiting for a reply, checks that the link was not closed


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed answer."""


class Channel(Protocol):
    """A duplex byte stream to the agent. Its descriptors are non-blocking (an event loop waiting
    on one makes it so anyway): `send_nowait` and `recv_nowait` never wait, `send` and `recv_some`
    poll until they can go on."""

    @property
    def read_fd(self) -> int:
        """Readable when the agent has said something (or is gone); -1 once closed."""
        ...

    @property
    def write_fd(self) -> int:
        """Writable when `send_nowait` can take more."""
        ...

    def send(self, data: bytes) -> None: ...

    def send_nowait(self, data: memoryview) -> int:
        """As many bytes of `data` as go without waiting (maybe 0); how many."""
        ...

    def recv_some(self, timeout: float | None) -> bytes:
        """Some bytes of the agent's stdout; b"" once it is gone. Raises TimeoutError."""
        ...

    def recv_nowait(self) -> bytes | None:
        """`recv_some` without waiting: None when there is nothing yet."""
        ...

    def close(self) -> None: ...


def _wait_ready(fd: int, timeout: float | None, events: int = select.POLLIN) -> None:
    """Wait until `fd` is readable (or, with `events=POLLOUT`, writable); TimeoutError past `timeout`."""
    poller = select.poll()  # not select(): a busy server has descriptors past FD_SETSIZE
    poller.register(fd, events)
    if not poller.poll(None if timeout is None else timeout * 1000.0):
        raise TimeoutError


class PollingChannel:
    """`send` and `recv_some` of a channel, made of its non-blocking halves and `poll`."""

    read_fd: int
    write_fd: int

    def send_nowait(self, data: memoryview) -> int:
        raise NotImplementedError

    def recv_nowait(self) -> bytes | None:
        raise NotImplementedError

    def send(self, data: bytes) -> None:
        view = memoryview(data)
        while True:
            view = view[self.send_nowait(view) :]
            if not view:
                return
            try:
                _wait_ready(self.write_fd, None, select.POLLOUT)
            except ValueError:  # closed under us (descriptor -1)
                raise BrokenPipeError("the channel was closed") from None

    def recv_some(self, timeout: float | None) -> bytes:
        while True:
            chunk = self.recv_nowait()
            if chunk is not None:
                return chunk
            try:
                _wait_ready(self.read_fd, timeout)
            except ValueError:  # closed under us (descriptor -1)
                return b""


class AttachChannel(PollingChannel):
    """The agent's stdin/stdout through a container's attach socket (Docker's multiplexed stream)."""

    def __init__(self, sock: socket.socket, keep: object = None):
        self.sock = sock
        self.sock.setblocking(False)
        self._keep = keep  # the SDK's wrapper owning `sock`; held so that it is not collected early
        self.raw = bytearray()
        self.stderr: deque[bytes] = deque(maxlen=32)  # the agent's own errors, for diagnostics

    @property
    def read_fd(self) -> int:  # type: ignore[override]
        return self.sock.fileno()

    @property
    def write_fd(self) -> int:  # type: ignore[override]
        return self.sock.fileno()

    def send_nowait(self, data: memoryview) -> int:
        try:
            return self.sock.send(data)
        except BlockingIOError:
            return 0

    def recv_nowait(self) -> bytes | None:
        while True:
            # frames: 1 byte stream (1 stdout, 2 stderr), 3 zero bytes, 4-byte big-endian size
            while len(self.raw) >= 8:
                size = int.from_bytes(self.raw[4:8], "big")
                if size > MAX_STREAM_FRAME:
                    raise ProtocolError(f"a stream frame of {size} bytes")
                if len(self.raw) < 8 + size:
                    break
                kind, payload = self.raw[0], bytes(self.raw[8 : 8 + size])
                del self.raw[: 8 + size]
                if not self.raw:
                    self.raw = bytearray()  # give the memory back
                if kind == 1:
                    return payload
                self.stderr.append(payload[:4096])
            try:
                chunk = self.sock.recv(1 << 20)
            except BlockingIOError:
                return None
            except OSError:  # closed under us
                return b""
            if not chunk:
                return b""
            self.raw += chunk

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


class PipeChannel(PollingChannel):
    """The agent as a local child process (the unisolated local backend)."""

    def __init__(self, proc: subprocess.Popen[bytes]):
        if proc.stdin is None or proc.stdout is None:
            raise ValueError("the agent's process needs a pipe for its stdin and one for its stdout")
        self.proc = proc
        self.stdin, self.stdout = proc.stdin, proc.stdout
        self.read_fd, self.write_fd = self.stdout.fileno(), self.stdin.fileno()
        os.set_blocking(self.read_fd, False)
        os.set_blocking(self.write_fd, False)

    def send_nowait(self, data: memoryview) -> int:
        try:
            return os.write(self.write_fd, data)
        except BlockingIOError:
            return 0

    def recv_nowait(self) -> bytes | None:
        try:
            return os.read(self.read_fd, 1 << 20)
        except BlockingIOError:
            return None

    def close(self) -> None:
        try:
            self.stdin.close()  # end of input: the agent ends, and its commands with it
            self.proc.wait(timeout=2.0)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        with contextlib.suppress(OSError):
            self.stdout.close()


async def _readable(fd: int) -> None:
    """Until `fd` is readable, or `CLOSED_CHECK_S` passed (a link closed under the wait may never wake
    it). On the asyncio loop itself: `anyio.wait_readable` in `anyio.move_on_after` measured about
    40 microseconds more per exec (the server runs on asyncio only, under uvicorn)."""
    loop = asyncio.get_running_loop()
    woken = loop.create_future()

    def wake() -> None:
        if not woken.done():
            woken.set_result(None)

    loop.add_reader(fd, wake)
    timer = loop.call_later(CLOSED_CHECK_S, wake)
    try:
        await woken
    finally:
        timer.cancel()
        loop.remove_reader(fd)


class ReplyBuffer:
    """One reply as it comes in: its 4-byte size (at most `limit`), then exactly that much JSON."""

    def __init__(self, limit: int):
        self.limit = limit
        self.buf = bytearray()
        self.size: int | None = None
        self.value: Any = None

    def add(self, chunk: bytes) -> bool:
        """Take `chunk`; True once the whole reply is in `value`."""
        self.buf += chunk
        if self.size is None and len(self.buf) >= 4:
            (size,) = HEADER.unpack(self.buf[:4])
            if size > self.limit:
                raise ProtocolError(f"a reply of {size} bytes, over the {self.limit} this request allows")
            self.size = size
        if self.size is None or len(self.buf) < 4 + self.size:
            return False
        if len(self.buf) > 4 + self.size:
            raise ProtocolError("bytes after the reply")
        del self.buf[:4]  # in place: no second copy of a big reply
        try:
            self.value = json.loads(self.buf)
        except ValueError as exc:
            raise ProtocolError(f"a reply that is not JSON: {exc}") from None
        self.buf = bytearray()
        return True


class AgentLink:
    """Request/response with one agent, one request at a time (the agent is serial anyway)."""

    def __init__(self, channel: Channel):
        self.channel = channel
        self.lock = threading.Lock()
        self._send_lock = threading.Lock()
        self.dead: str | None = None

    def call(
        self, op: str, *, wait_s: float | None = 60.0, limit: int = 1 << 20, **fields: Any
    ) -> dict[str, Any]:
        with self.lock:
            request_id, frame = self._request(op, fields)
            try:
                with self._send_lock:
                    self.channel.send(frame)
                reply = self._read(wait_s, limit)
            except (TimeoutError, OSError, EOFError, ProtocolError) as exc:
                raise self._failure(exc, wait_s) from None
            self._check_id(reply, request_id)
        return self._answer(reply)

    async def acall(
        self, op: str, *, wait_s: float | None = 60.0, limit: int = 1 << 20, **fields: Any
    ) -> dict[str, Any]:
        """`call` on the event loop, waiting for the agent without a thread. Once the request is
        sent, the caller's cancellation waits for the reply (as a thread would run on), so the link
        never falls out of step; past `wait_s` the sandbox is dead, as with `call`."""
        while not self.lock.acquire(blocking=False):  # held by a call from a thread: rare and brief
            await anyio.sleep(LOCK_POLL_S)
        try:
            request_id, frame = self._request(op, fields)
            deadline = math.inf if wait_s is None else anyio.current_time() + wait_s
            reply = None
            with anyio.CancelScope(deadline=deadline, shield=True):
                try:
                    reply = await self._exchange(frame, limit)
                except (OSError, EOFError, ProtocolError) as exc:
                    raise self._failure(exc, wait_s) from None
            if reply is None:  # the deadline passed
                raise self._failure(TimeoutError(), wait_s)
            self._check_id(reply, request_id)
        finally:
            self.lock.release()
        return self._answer(reply)

    def _request(self, op: str, fields: dict[str, Any]) -> tuple[str, bytes]:
        """A new request's unguessable id and its frame (with the link's lock held)."""
        if self.dead:
            raise SandboxDead(self.dead)
        request_id = secrets.token_hex(16)
        data = json.dumps({"op": op, "id": request_id, **fields}).encode()
        return request_id, HEADER.pack(len(data)) + data

    def _failure(self, exc: BaseException, wait_s: float | None) -> SandboxDead:
        if isinstance(exc, TimeoutError):
            return self.fail(f"the sandbox did not answer within {wait_s:g} s")
        if isinstance(exc, ProtocolError):
            return self.fail(f"the sandbox broke its protocol ({exc})")
        return self.fail(
            "the sandbox stopped answering: its container was killed, removed or ran out of memory"
        )

    def _check_id(self, reply: Any, request_id: str) -> None:
        if not isinstance(reply, dict) or reply.get("id") != request_id:
            raise self.fail("the sandbox broke its protocol (a reply to another request)")

    @staticmethod
    def _answer(reply: dict[str, Any]) -> dict[str, Any]:
        """The reply's fields, or its error raised as the matching exception."""
        reply.pop("id")
        if not reply.pop("ok", False):
            error = str(reply.get("error", "unknown error"))
            if reply.get("kind") == "not_found":
                raise FileNotFoundError(error)
            if reply.get("kind") == "invalid":
                raise InvalidRequest(error)
            if reply.get("kind") == "disk_full":
                raise DiskFull(f"no space left in the sandbox: its /workspace (disk_mb MiB) or the space it "
                               f"stages uploads in (tmp_mb) is full; remove files or ask a larger disk_mb: "
                               f"{error}")
            raise SandboxError(error)
        return reply

    def _read(self, wait_s: float | None, limit: int) -> Any:
        deadline = None if wait_s is None else time.monotonic() + wait_s
        reply = ReplyBuffer(limit)
        while True:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.001)
            chunk = self.channel.recv_some(remaining)
            if not chunk:
                raise EOFError
            if reply.add(chunk):
                return reply.value

    async def _exchange(self, frame: bytes, limit: int) -> Any:
        """Send `frame` and read its reply, waiting on the event loop whenever the agent is not ready."""
        while not self._send_lock.acquire(blocking=False):  # a heartbeat being sent
            await anyio.sleep(LOCK_POLL_S)
        try:
            view = memoryview(frame)
            while True:
                view = view[self.channel.send_nowait(view) :]
                if not view:
                    break
                await anyio.wait_writable(self.channel.write_fd)
        finally:
            self._send_lock.release()
        reply = ReplyBuffer(limit)
        while True:
            chunk = self.channel.recv_nowait()
            if chunk is None:
                fd = self.channel.read_fd
                if fd < 0:
                    raise EOFError  # closed under us
                await _readable(fd)
                if self.dead:
                    raise EOFError
                continue
            if not chunk:
                raise EOFError
            if reply.add(chunk):
                return reply.value

    def beat(self) -> None:
        """Tell the agent the host is alive (its watchdog ends it after a long silence)."""
        if self.dead or not self._send_lock.acquire(blocking=False):
            return
        try:
            data = b'{"op":"beat"}'
            self.channel.send(HEADER.pack(len(data)) + data)
        except (OSError, ValueError):
            self.fail("the sandbox's connection broke")
        finally:
            self._send_lock.release()

    def fail(self, reason: str) -> SandboxDead:
        """Mark the link dead for `reason` (the first reason wins) and close it."""
        if not self.dead:
            self.dead = reason
            with contextlib.suppress(OSError):
                self.channel.close()
        return SandboxDead(self.dead)

    def close(self) -> None:
        self.dead = self.dead or "the sandbox is closed"
        self.channel.close()
