"""The `Sandbox` protocol and its implementation on top of the in-sandbox agent.

Every way of getting a sandbox (Docker in-process, the local backend, the HTTP client) hands out
objects with the same methods, so code that runs commands never cares where they run.
"""

from __future__ import annotations

import base64
import contextlib
import io
import itertools
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentrl.sandbox_server.sandboxes.channel import AgentLink
from agentrl.sandbox_server.wire.errors import Busy, InvalidRequest, SandboxError, SandboxNotFound
from agentrl.sandbox_server.wire.languages import script_command
from agentrl.sandbox_server.wire.models import (
    MAX_RELAY_DATA,
    ExecArgs,
    ExecOptions,
    ExecResult,
    RelayArgs,
    RelayOptions,
    RelayResult,
    SandboxInfo,
    exec_options,
    relay_options,
)
from agentrl.sandbox_server.wire.paths import check_path, check_tar

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack: Python 3.11+

CHUNK = 1 << 20  # files travel to and from the agent in frames of this size: memory stays flat
CHUNK_REPLY_LIMIT = CHUNK * 4 // 3 + (64 << 10)  # a chunk as base64 in a reply


def exec_reply_limit(max_output_bytes: int) -> int:
    """The most bytes an exec reply may take as received: two captures bounded as JSON, and a few
    fields (the agent marks what it left out in a few dozen bytes per capture)."""
    return 2 * max_output_bytes + (64 << 10)


def exec_call(
    command: str, options: ExecOptions, script: str | None = None, script_suffix: str = ""
) -> tuple[dict[str, Any], float, int]:
    """An exec's request to the agent: its fields, how long to wait for the reply, and the reply's
    size limit."""
    # the agent reads the options as the caller gave them, flat as in the HTTP body (stdin bytes as
    # base64 in `stdin_b64`)
    fields: dict[str, Any] = {"command": command, **options.model_dump(mode="json")}
    if script is not None:
        fields["script"] = {"data": script, "suffix": script_suffix}
        # Python scripts run in a fork of the agent's pristine zygote: no start-up cost
        fields["fork_python"] = options.mode == "oneshot" and script_suffix == ".py"
    # the agent enforces timeout_s; the extra wait only catches an agent that died. A reply holds
    # two captures, each at most `max_output_bytes` as JSON (escapes counted), and a few fields
    return fields, options.timeout_s + 30.0, exec_reply_limit(options.max_output_bytes)


def relay_call(port: int, data: str, options: RelayOptions) -> tuple[dict[str, Any], float, int]:
    """A relay's request to the agent, as `exec_call`: its fields, the wait (the agent enforces
    `timeout_s`; the extra only catches an agent that died) and the reply's limit (the answer's bytes
    as base64, and a few fields)."""
    if type(port) is not int or not 1 <= port <= 65535:
        raise InvalidRequest(f"a relay takes a TCP port from 1 to 65535, not {port!r}")
    if not isinstance(data, str) or len(data) > MAX_RELAY_DATA:
        raise InvalidRequest(f"a relay sends text of at most {MAX_RELAY_DATA} characters")
    fields = {"port": port, "data": data, **options.model_dump(mode="json")}
    return fields, options.timeout_s + 30.0, options.max_output_bytes * 4 // 3 + (64 << 10)


def relay_result(reply: dict[str, Any]) -> RelayResult:
    """The agent's reply as a `RelayResult`: its bytes as text, as an exec's output."""
    data = base64.b64decode(reply.pop("data_b64")).decode("utf-8", "replace")
    return RelayResult(data=data, **reply)


def code_options(options: ExecOptions | None, changes: ExecArgs) -> ExecOptions:
    """A script's options: `mode` is always oneshot."""
    return exec_options(options, changes).model_copy(update={"mode": "oneshot"})


@runtime_checkable
class Sandbox(Protocol):
    """One isolated machine for one episode: a persistent shell, a one-shot runner and files."""

    sandbox_id: str

    def exec(
        self, command: str, options: ExecOptions | None = None, **changes: Unpack[ExecArgs]
    ) -> ExecResult:
        """Run `command` as the sandbox's user, as `options` (with `changes`) say. `session`: in the
        persistent shell (cwd, variables and functions persist); `oneshot`: a fresh bash with a clean
        environment (fixed PATH, HOME, LANG plus the sandbox's env), the workspace as cwd and no
        descriptor but its own pipes. Every process the command leaves running is killed when it
        ends, unless `keep_alive`."""
        ...

    def run_code(self, code: str, language: str = "python", options: ExecOptions | None = None,
                 **changes: Unpack[ExecArgs]) -> ExecResult:
        """Run `code` as a script of `language` in a fresh process (`mode` is always oneshot)."""
        ...

    def relay(
        self, port: int, data: str, options: RelayOptions | None = None, **changes: Unpack[RelayArgs]
    ) -> RelayResult:
        """Send `data` to TCP `port` on the sandbox's own loopback and return what it answers until it
        closes the connection (`RelayOptions` bound the time and the bytes kept). No command runs:
        the sandbox's agent holds the connection, so a request to a server a command started (with
        `keep_alive`) costs a round trip. The sandbox's network stays off: only its loopback."""
        ...

    def reset_processes(self) -> None:
        """Kill every process of the sandbox's user (kept ones and the session shell included)."""
        ...

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None: ...

    def read_file(self, path: str) -> bytes: ...

    def put_archive(self, path: str, tar_bytes: bytes) -> None: ...

    def get_archive(self, path: str) -> bytes: ...

    def close(self) -> None: ...


def as_bytes(data: bytes | str) -> bytes:
    return data.encode() if isinstance(data, str) else bytes(data)


class AgentSandbox:
    """A sandbox reached through its agent; the backends create these, callers use `Sandbox`.

    At most `max_pending` calls may be running or waiting at once (more: `Busy`, HTTP 429), so a
    flood of calls on one sandbox holds a bounded number of threads.
    """

    def __init__(
        self,
        sandbox_id: str,
        link: AgentLink,
        info: SandboxInfo,
        on_close: Callable[[str], None],
        *,
        owner: str | None = None,
        max_pending: int = 8,
    ):
        self.sandbox_id = sandbox_id
        self.link = link
        self.info = info
        self.owner = owner
        self.max_pending = max_pending
        self._on_close = on_close
        self._pending = threading.BoundedSemaphore(max_pending)
        self.closed_reason: str | None = None

    def __repr__(self) -> str:
        return f"AgentSandbox({self.sandbox_id!r}, image={self.info.image!r})"

    def __enter__(self) -> AgentSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def dead(self) -> str | None:
        """Why the sandbox can no longer serve calls (its container died, ...), or None."""
        return self.link.dead if not self.closed_reason else None

    def _call(
        self, op: str, wait_s: float | None = 60.0, limit: int = 1 << 20, **fields: Any
    ) -> dict[str, Any]:
        with self._calling():
            return self.link.call(op, wait_s=wait_s, limit=limit, **fields)

    async def _acall(
        self, op: str, wait_s: float | None = 60.0, limit: int = 1 << 20, **fields: Any
    ) -> dict[str, Any]:
        """`_call` on the event loop (`AgentLink.acall`)."""
        with self._calling():
            return await self.link.acall(op, wait_s=wait_s, limit=limit, **fields)

    @contextlib.contextmanager
    def _calling(self) -> Iterator[None]:
        """Around every call: the pending bound, the idle clock, and a clear error when the sandbox
        was closed under the call."""
        if self.closed_reason:
            raise SandboxNotFound(f"sandbox {self.sandbox_id} is gone: {self.closed_reason}")
        if not self._pending.acquire(blocking=False):
            raise Busy(f"sandbox {self.sandbox_id} already has {self.max_pending} calls running or waiting")
        self.info.last_used_at = time.time()
        try:
            yield
        except SandboxError:
            if self.closed_reason:  # closed under a running call (TTL, delete): say so
                raise SandboxNotFound(f"sandbox {self.sandbox_id} is gone: {self.closed_reason}") from None
            raise
        finally:
            self.info.last_used_at = time.time()
            self._pending.release()

    def exec(
        self,
        command: str,
        options: ExecOptions | None = None,
        *,
        script: str | None = None,
        script_suffix: str = "",
        **changes: Unpack[ExecArgs],
    ) -> ExecResult:
        """`Sandbox.exec`; `script` (with its file suffix) is written for the command to run as `{script}`."""
        fields, wait_s, limit = exec_call(command, exec_options(options, changes), script, script_suffix)
        return ExecResult(**self._call("exec", wait_s=wait_s, limit=limit, **fields))

    def run_code(self, code: str, language: str = "python", options: ExecOptions | None = None,
                 **changes: Unpack[ExecArgs]) -> ExecResult:
        suffix, command = script_command(language)
        return self.exec(command, code_options(options, changes), script=code, script_suffix=suffix)

    async def aexec(self, command: str, options: ExecOptions) -> ExecResult:
        """`exec` on the event loop: what the server's exec route runs, with no worker thread."""
        fields, wait_s, limit = exec_call(command, options)
        return ExecResult(**await self._acall("exec", wait_s=wait_s, limit=limit, **fields))

    async def arun_code(self, code: str, language: str, options: ExecOptions) -> ExecResult:
        """`run_code` on the event loop."""
        suffix, command = script_command(language)
        fields, wait_s, limit = exec_call(command, code_options(options, {}), code, suffix)
        return ExecResult(**await self._acall("exec", wait_s=wait_s, limit=limit, **fields))

    def relay(
        self, port: int, data: str, options: RelayOptions | None = None, **changes: Unpack[RelayArgs]
    ) -> RelayResult:
        """`Sandbox.relay`."""
        fields, wait_s, limit = relay_call(port, data, relay_options(options, changes))
        return relay_result(self._call("relay", wait_s=wait_s, limit=limit, **fields))

    async def arelay(self, port: int, data: str, options: RelayOptions) -> RelayResult:
        """`relay` on the event loop: what the server's relay route runs."""
        fields, wait_s, limit = relay_call(port, data, options)
        return relay_result(await self._acall("relay", wait_s=wait_s, limit=limit, **fields))

    def reset_processes(self) -> None:
        self._call("reset", wait_s=30.0)

    def wipe(self) -> None:
        """Back to a new sandbox's state: no process, no file, no IPC object of the user left."""
        self._call("wipe", wait_s=30.0)

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        data = as_bytes(data)
        path = check_path(path)
        if len(data) <= CHUNK:
            self._call("write", path=path, data=base64.b64encode(data).decode(), mode=mode)
        else:
            self.write_stream(path, io.BytesIO(data), mode)

    def write_stream(self, path: str, source: IO[bytes], mode: int = 0o644) -> None:
        """`write_file` from a file object: small files in one call, others staged a chunk at a time
        in the agent's own directory, then put in place with the user's rights."""
        path = check_path(path)
        first = source.read(CHUNK)
        rest = source.read(CHUNK)
        if not rest:
            self._call("write", path=path, data=base64.b64encode(first).decode(), mode=mode)
            return
        name = self._stage(itertools.chain((first, rest), iter(lambda: source.read(CHUNK), b"")))
        self._call("put_file", name=name, path=path, mode=mode, wait_s=300.0)

    def _stage(self, chunks: Iterable[bytes]) -> str:
        name = secrets.token_hex(12)
        for i, chunk in enumerate(chunks):
            self._call("stage", name=name, data=base64.b64encode(chunk).decode(), append=i > 0)
        return name

    def read_file(self, path: str, max_bytes: int = 1 << 30) -> bytes:
        return b"".join(self.download(path, max_bytes=max_bytes))

    def download(self, path: str, *, archive: bool = False, max_bytes: int = 1 << 30) -> Iterator[bytes]:
        """A file (or, `archive`, a tar archive of a path) a chunk at a time: the agent reads it as the
        user into a file of its own and the host fetches it by the chunk, so no more than a chunk is
        ever in memory here. Links are never followed (one on the way is an `InvalidRequest`)."""
        size, name, data = self.stage_download(path, archive=archive, max_bytes=max_bytes)
        if name is None:
            yield data
            return
        try:
            for offset in range(0, size, CHUNK):
                yield self.fetch_chunk(name, offset)
        finally:
            self.drop_download(name)

    def stage_download(
        self, path: str, *, archive: bool = False, max_bytes: int = 1 << 30
    ) -> tuple[int, str | None, bytes]:
        """Have the agent stage a download: (size, name to fetch it by, b"") or, when it fits in one
        chunk, (size, None, the bytes)."""
        name = secrets.token_hex(12)
        reply = self._call(
            "download",
            path=check_path(path),
            archive=archive,
            max_bytes=max_bytes,
            name=name,
            inline_bytes=CHUNK,
            limit=CHUNK_REPLY_LIMIT,
            wait_s=300.0,
        )
        if "data" in reply:
            return int(reply["size"]), None, base64.b64decode(reply["data"])
        return int(reply["size"]), name, b""

    def fetch_chunk(self, name: str, offset: int) -> bytes:
        reply = self._call("fetch", name=name, offset=offset, size=CHUNK, limit=CHUNK_REPLY_LIMIT)
        return base64.b64decode(reply["data"])

    def drop_download(self, name: str) -> None:
        self._call("drop", name=name)

    def put_archive(self, path: str, tar_bytes: bytes) -> None:
        with tempfile.SpooledTemporaryFile(CHUNK) as source:
            source.write(tar_bytes)
            source.seek(0)
            self.put_archive_stream(path, source)

    def put_archive_stream(self, path: str, source: IO[bytes]) -> None:
        """Unpack a tar archive under `path`; every member is checked here first (no link or path
        out of the workspace, no device), and the archive travels to the agent in chunks."""
        path = check_path(path)
        check_tar(source, path)
        source.seek(0)
        name = self._stage(iter(lambda: source.read(CHUNK), b""))
        self._call("put_tar", name=name, path=path, wait_s=300.0)

    def get_archive(self, path: str, max_bytes: int = 1 << 30) -> bytes:
        return b"".join(self.download(path, archive=True, max_bytes=max_bytes))

    def configure(self, env: dict[str, str]) -> None:
        self._call("configure", env=env)

    def close(self) -> None:
        if not self.closed_reason:
            self._on_close(self.sandbox_id)

    def mark_closed(self, reason: str) -> None:
        self.closed_reason = reason
        self.link.close()
