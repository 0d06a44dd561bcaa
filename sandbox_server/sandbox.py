"""The `Sandbox` protocol and its implementation on top of the in-sandbox agent.

Every way of getting a sandbox (Docker in-process, the local backend, the HTTP client) hands out
objects with the same methods, so code that runs commands never cares where they run.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import selectors
import socket
import struct
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from agentrl.sandbox_server.errors import InvalidRequest, SandboxError, SandboxNotFound
from agentrl.sandbox_server.models import ExecMode, ExecResult, SandboxInfo

AGENT_SOURCE = (Path(__file__).with_name("agent.py")).read_text()
HEADER = struct.Struct(">I")
# language -> (script suffix, command running it); `{script}` becomes the script's path
LANGUAGES: dict[str, tuple[str, str]] = {
    "python": (".py", "python3 {script}"),
    "python3": (".py", "python3 {script}"),
    "bash": (".sh", "bash {script}"),
    "sh": (".sh", "sh {script}"),
}


@runtime_checkable
class Sandbox(Protocol):
    """One isolated machine for one episode: a persistent shell, a one-shot runner and files."""

    sandbox_id: str

    def exec(
        self,
        command: str,
        *,
        timeout_s: float = 30.0,
        idle_timeout_s: float | None = None,
        stdin: str | bytes | None = None,
        mode: ExecMode = "session",
        max_output_bytes: int = 65536,
    ) -> ExecResult: ...

    def run_code(
        self,
        code: str,
        language: str = "python",
        *,
        timeout_s: float = 30.0,
        stdin: str | bytes | None = None,
        max_output_bytes: int = 65536,
    ) -> ExecResult: ...

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None: ...

    def read_file(self, path: str) -> bytes: ...

    def put_archive(self, path: str, tar_bytes: bytes) -> None: ...

    def get_archive(self, path: str) -> bytes: ...

    def close(self) -> None: ...


def script_command(language: str) -> tuple[str, str]:
    try:
        return LANGUAGES[language.lower()]
    except KeyError:
        raise InvalidRequest(
            f"unsupported language {language!r}; supported: {', '.join(LANGUAGES)}"
        ) from None


def as_bytes(data: bytes | str) -> bytes:
    return data.encode() if isinstance(data, str) else bytes(data)


# --- transports to the agent --------------------------------------------------------------------


class Channel(Protocol):
    def send(self, data: bytes) -> None: ...

    def recv_some(self, timeout: float | None) -> bytes:
        """Some bytes of the agent's stdout; b"" once it is gone. Raises TimeoutError."""
        ...

    def close(self) -> None: ...


class AttachChannel:
    """The agent's stdin/stdout through a container's attach socket (Docker's multiplexed stream)."""

    def __init__(self, sock: socket.socket, keep: object = None):
        self.sock = sock
        self._keep = keep  # the SDK's wrapper owning `sock`; held so that it is not collected early
        self.raw = bytearray()
        self.stderr: deque[bytes] = deque(maxlen=32)  # the agent's own errors, for diagnostics

    def send(self, data: bytes) -> None:
        self.sock.settimeout(None)
        self.sock.sendall(data)

    def recv_some(self, timeout: float | None) -> bytes:
        while True:
            # frames: 1 byte stream (1 stdout, 2 stderr), 3 zero bytes, 4-byte big-endian size
            while len(self.raw) >= 8:
                size = int.from_bytes(self.raw[4:8], "big")
                if len(self.raw) < 8 + size:
                    break
                kind, payload = self.raw[0], bytes(self.raw[8 : 8 + size])
                del self.raw[: 8 + size]
                if kind == 1:
                    return payload
                self.stderr.append(payload)
            self.sock.settimeout(timeout)
            try:
                chunk = self.sock.recv(1 << 20)
            except TimeoutError as exc:
                raise TimeoutError from exc
            except OSError:
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

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.fd = proc.stdout.fileno()

    def send(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def recv_some(self, timeout: float | None) -> bytes:
        with selectors.DefaultSelector() as sel:
            sel.register(self.fd, selectors.EVENT_READ)
            if not sel.select(timeout):
                raise TimeoutError
        return os.read(self.fd, 1 << 20)

    def close(self) -> None:
        try:
            self.proc.stdin.close()  # end of input: the agent stops its shell and exits
            self.proc.wait(timeout=2.0)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


class AgentLink:
    """Request/response with one agent, one request at a time (the agent is serial anyway)."""

    def __init__(self, channel: Channel):
        self.channel = channel
        self.buf = bytearray()
        self.lock = threading.Lock()
        self.dead: str | None = None

    def call(self, op: str, *, wait_s: float | None = 60.0, **fields: Any) -> dict[str, Any]:
        with self.lock:
            if self.dead:
                raise SandboxError(self.dead)
            data = json.dumps({"op": op, **fields}).encode()
            try:
                self.channel.send(HEADER.pack(len(data)) + data)
                reply = self._read(wait_s)
            except (OSError, TimeoutError, EOFError) as exc:
                self.dead = (
                    f"the sandbox stopped answering ({type(exc).__name__}): "
                    "it was killed or ran out of memory"
                )
                raise SandboxError(self.dead) from exc
        if not reply.pop("ok"):
            if reply.get("kind") == "not_found":
                raise FileNotFoundError(reply["error"])
            if reply.get("kind") == "invalid":
                raise InvalidRequest(reply["error"])
            raise SandboxError(reply["error"])
        return reply

    def _read(self, wait_s: float | None) -> dict[str, Any]:
        deadline = None if wait_s is None else time.monotonic() + wait_s
        while True:
            if len(self.buf) >= 4:
                (size,) = HEADER.unpack(self.buf[:4])
                if len(self.buf) >= 4 + size:
                    message = json.loads(bytes(self.buf[4 : 4 + size]))
                    del self.buf[: 4 + size]
                    return message
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.001)
            chunk = self.channel.recv_some(remaining)
            if not chunk:
                raise EOFError
            self.buf += chunk

    def close(self) -> None:
        self.dead = "the sandbox is closed"
        self.channel.close()


# --- the sandbox ----------------------------------------------------------------------------------


class AgentSandbox:
    """A sandbox reached through its agent; the backends create these, callers use `Sandbox`."""

    def __init__(self, sandbox_id: str, link: AgentLink, info: SandboxInfo, on_close: Callable[[str], None]):
        self.sandbox_id = sandbox_id
        self.link = link
        self.info = info
        self._on_close = on_close
        self.closed_reason: str | None = None

    def __repr__(self) -> str:
        return f"AgentSandbox({self.sandbox_id!r}, image={self.info.image!r})"

    def __enter__(self) -> AgentSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, op: str, wait_s: float | None = 60.0, **fields: Any) -> dict[str, Any]:
        if self.closed_reason:
            raise SandboxNotFound(f"sandbox {self.sandbox_id} is gone: {self.closed_reason}")
        self.info.last_used_at = time.time()
        try:
            return self.link.call(op, wait_s=wait_s, **fields)
        except SandboxError:
            if self.closed_reason:  # closed under a running call (TTL, delete): say so
                raise SandboxNotFound(f"sandbox {self.sandbox_id} is gone: {self.closed_reason}") from None
            raise
        finally:
            self.info.last_used_at = time.time()

    def exec(
        self,
        command: str,
        *,
        timeout_s: float = 30.0,
        idle_timeout_s: float | None = None,
        stdin: str | bytes | None = None,
        mode: ExecMode = "session",
        max_output_bytes: int = 65536,
        script: str | None = None,
        script_suffix: str = "",
    ) -> ExecResult:
        fields: dict[str, Any] = {
            "command": command,
            "timeout_s": timeout_s,
            "idle_timeout_s": idle_timeout_s,
            "mode": mode,
            "max_output_bytes": max_output_bytes,
        }
        if stdin is not None:
            fields["stdin"] = base64.b64encode(as_bytes(stdin)).decode()
        if script is not None:
            fields["script"] = {"data": script, "suffix": script_suffix}
            # Python scripts run in a fork of the agent's interpreter: no start-up cost
            fields["fork_python"] = mode == "oneshot" and script_suffix == ".py"
        # the agent enforces timeout_s; the extra wait only catches an agent that died
        reply = self._call("exec", wait_s=timeout_s + 30.0, **fields)
        reply.pop("id", None)
        return ExecResult(**reply)

    def run_code(
        self,
        code: str,
        language: str = "python",
        *,
        timeout_s: float = 30.0,
        stdin: str | bytes | None = None,
        max_output_bytes: int = 65536,
    ) -> ExecResult:
        suffix, command = script_command(language)
        return self.exec(
            command,
            timeout_s=timeout_s,
            stdin=stdin,
            mode="oneshot",
            max_output_bytes=max_output_bytes,
            script=code,
            script_suffix=suffix,
        )

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        self._call("write", path=path, data=base64.b64encode(as_bytes(data)).decode(), mode=mode)

    def read_file(self, path: str, max_bytes: int = 1 << 30) -> bytes:
        return base64.b64decode(self._call("read", path=path, max_bytes=max_bytes)["data"])

    def put_archive(self, path: str, tar_bytes: bytes) -> None:
        self._call("put_tar", path=path, data=base64.b64encode(tar_bytes).decode())

    def get_archive(self, path: str, max_bytes: int = 1 << 30) -> bytes:
        return base64.b64decode(self._call("get_tar", path=path, max_bytes=max_bytes)["data"])

    def configure(self, env: dict[str, str]) -> None:
        self._call("configure", env=env)

    def close(self) -> None:
        if not self.closed_reason:
            self._on_close(self.sandbox_id)

    def mark_closed(self, reason: str) -> None:
        self.closed_reason = reason
        self.link.close()
