"""Talking to the in-sandbox agent: length-prefixed JSON frames, each reply matched to its request.

The host trusts nothing a container sends: a reply must carry its request's unguessable id and stay
under a size fixed by the request, or the sandbox is marked dead (`SandboxDead`, HTTP 410) with the
reason; no buffer outlives the reply it held, so memory stays bounded whatever a container prints.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import socket
import struct
import subprocess
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Protocol

from agentrl.sandbox_server.errors import DiskFull, InvalidRequest, SandboxDead, SandboxError


def _agent_source() -> str:
    """The program the agent runs (`python3 -c`): its helper modules, then the agent itself."""
    here = Path(__file__).parent
    source = "import sys, types\n"
    for module, file in (("agentrl_agent_lib", "agent_lib.py"), ("agentrl_agent_files", "agent_files.py"),
                         ("agentrl_agent_wipe", "agent_wipe.py")):
        text = (here / file).read_text()
        source += (
            f"_m = types.ModuleType({module!r})\n"
            f"sys.modules[{module!r}] = _m\n"
            f"exec(compile({text!r}, {file!r}, 'exec'), _m.__dict__)\n"
        )
    return source + (here / "agent.py").read_text()


AGENT_SOURCE = _agent_source()
HEADER = struct.Struct(">I")
MAX_STREAM_FRAME = 1 << 24  # Docker cuts a container's output into frames far smaller than this


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed answer."""


class Channel(Protocol):
    def send(self, data: bytes) -> None: ...

    def recv_some(self, timeout: float | None) -> bytes:
        """Some bytes of the agent's stdout; b"" once it is gone. Raises TimeoutError."""
        ...

    def close(self) -> None: ...


def _wait_readable(fd: int, timeout: float | None) -> None:
    poller = select.poll()  # not select(): a busy server has descriptors past FD_SETSIZE
    poller.register(fd, select.POLLIN)
    if not poller.poll(None if timeout is None else timeout * 1000.0):
        raise TimeoutError


class AttachChannel:
    """The agent's stdin/stdout through a container's attach socket (Docker's multiplexed stream)."""

    def __init__(self, sock: socket.socket, keep: object = None):
        self.sock = sock
        self.sock.setblocking(True)
        self._keep = keep  # the SDK's wrapper owning `sock`; held so that it is not collected early
        self.raw = bytearray()
        self.stderr: deque[bytes] = deque(maxlen=32)  # the agent's own errors, for diagnostics

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_some(self, timeout: float | None) -> bytes:
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
                _wait_readable(self.sock.fileno(), timeout)
                chunk = self.sock.recv(1 << 20)
            except (OSError, ValueError):  # ValueError: closed under us (fileno -1)
                return b""
            if not chunk:
                return b""
            self.raw += chunk

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


class PipeChannel:
    """The agent as a local child process (the unisolated local backend)."""

    def __init__(self, proc: subprocess.Popen[bytes]):
        if proc.stdin is None or proc.stdout is None:
            raise ValueError("the agent's process needs a pipe for its stdin and one for its stdout")
        self.proc = proc
        self.stdin, self.stdout = proc.stdin, proc.stdout
        self.fd = self.stdout.fileno()

    def send(self, data: bytes) -> None:
        self.stdin.write(data)
        self.stdin.flush()

    def recv_some(self, timeout: float | None) -> bytes:
        _wait_readable(self.fd, timeout)
        return os.read(self.fd, 1 << 20)

    def close(self) -> None:
        try:
            self.stdin.close()  # end of input: the agent ends, and its commands with it
            self.proc.wait(timeout=2.0)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        with contextlib.suppress(OSError):
            self.stdout.close()


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
            if self.dead:
                raise SandboxDead(self.dead)
            request_id = secrets.token_hex(16)
            data = json.dumps({"op": op, "id": request_id, **fields}).encode()
            try:
                with self._send_lock:
                    self.channel.send(HEADER.pack(len(data)) + data)
                reply = self._read(wait_s, limit)
            except TimeoutError:
                raise self.fail(f"the sandbox did not answer within {wait_s:g} s") from None
            except (OSError, EOFError):
                raise self.fail(
                    "the sandbox stopped answering: its container was killed, removed or ran out of memory"
                ) from None
            except ProtocolError as exc:
                raise self.fail(f"the sandbox broke its protocol ({exc})") from None
            if not isinstance(reply, dict) or reply.get("id") != request_id:
                raise self.fail("the sandbox broke its protocol (a reply to another request)")
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
        buf = bytearray()
        size = None
        while True:
            if size is None and len(buf) >= 4:
                (size,) = HEADER.unpack(buf[:4])
                if size > limit:
                    raise ProtocolError(f"a reply of {size} bytes, over the {limit} this request allows")
            if size is not None and len(buf) > 4 + size:
                raise ProtocolError("bytes after the reply")
            if size is not None and len(buf) == 4 + size:
                del buf[:4]  # in place: no second copy of a big reply
                try:
                    return json.loads(buf)
                except ValueError as exc:
                    raise ProtocolError(f"a reply that is not JSON: {exc}") from None
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.001)
            chunk = self.channel.recv_some(remaining)
            if not chunk:
                raise EOFError
            buf += chunk

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
