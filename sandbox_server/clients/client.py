"""HTTP clients of the sandbox server: `SandboxClient` (sync) and `AsyncSandboxClient`, httpx twins.

As httpx does with `Client` and `AsyncClient`, the twins share one request core: every operation is
built once, as a `SandboxCall` (the HTTP request and how to read its answer), by `_SandboxRequests` or
`_ClientRequests`; each twin writes its methods out one by one, each sending a call its way, so an
editor and a type checker see every method and the two cannot drift apart. Their sandboxes have the
same methods as the in-process ones (`Sandbox`), so code moves between a local Docker engine and a
remote server by changing one line. Exec options travel as `ExecOptions` (stdin bytes as base64).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import httpx

from agentrl.sandbox_server.sandboxes.sandbox import as_bytes, code_options
from agentrl.sandbox_server.wire.errors import SandboxError
from agentrl.sandbox_server.wire.models import (
    ExecArgs,
    ExecOptions,
    ExecResult,
    RelayArgs,
    RelayOptions,
    RelayResult,
    SandboxInfo,
    SpecArgs,
    exec_options,
    relay_options,
    spec_changes,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack: Python 3.11+

T = TypeVar("T")
SandboxInfos = list[SandboxInfo]  # (in the clients' bodies, `list` is their method)
REPLY_GRACE_S = 60.0  # an exec's HTTP wait beyond its own timeout: the server may queue it a while


def _raise_for(response: httpx.Response) -> None:
    if response.is_success:
        return
    try:
        body = response.json()
        detail, kind = str(body.get("detail")), body.get("kind", "")
    except (ValueError, AttributeError):
        detail, kind = response.text, ""
    if kind == "file_not_found":
        raise FileNotFoundError(detail)
    if response.status_code == 422:
        kind = "invalid"
    raise SandboxError.of_kind(kind)(f"HTTP {response.status_code}: {detail}")


@dataclass
class SandboxCall(Generic[T]):
    """One HTTP request and how to turn its response into a result."""

    method: str
    url: str
    read: Callable[[httpx.Response], T]
    kwargs: dict[str, Any] = field(default_factory=dict)
    tolerate: tuple[int, ...] = ()  # statuses that are not errors for this call

    def result(self, response: httpx.Response) -> T:
        if response.status_code not in self.tolerate:
            _raise_for(response)
        return self.read(response)


def _nothing(response: httpx.Response) -> None:
    return None


def _content(response: httpx.Response) -> bytes:
    return response.content


def _exec_result(response: httpx.Response) -> ExecResult:
    return ExecResult.model_validate_json(response.content)


def _relay_result(response: httpx.Response) -> RelayResult:
    return RelayResult.model_validate_json(response.content)


def _info(response: httpx.Response) -> SandboxInfo:
    return SandboxInfo.model_validate_json(response.content)


def _infos(response: httpx.Response) -> SandboxInfos:
    return [SandboxInfo.model_validate(item) for item in response.json()]


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


class _SandboxRequests:
    """The request core of both remote sandboxes: each operation on one sandbox as a `SandboxCall`."""

    def __init__(self, info: SandboxInfo):
        self.info = info
        self.sandbox_id = info.sandbox_id
        self._url = f"/v1/sandboxes/{info.sandbox_id}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.sandbox_id!r}, image={self.info.image!r})"

    def _exec_call(self, what: dict[str, str], options: ExecOptions) -> SandboxCall[ExecResult]:
        """POST .../exec: `what` (the command, or code and language) and the options, flat, as JSON."""
        body = {**what, **options.model_dump(mode="json")}
        timeout = options.timeout_s + REPLY_GRACE_S
        return SandboxCall("POST", self._url + "/exec", _exec_result, {"json": body, "timeout": timeout})

    def _command_call(
        self, command: str, options: ExecOptions | None, changes: ExecArgs
    ) -> SandboxCall[ExecResult]:
        return self._exec_call({"command": command}, exec_options(options, changes))

    def _code_call(
        self, code: str, language: str, options: ExecOptions | None, changes: ExecArgs
    ) -> SandboxCall[ExecResult]:
        return self._exec_call({"code": code, "language": language}, code_options(options, changes))

    def _relay_call(
        self, port: int, data: str, options: RelayOptions | None, changes: RelayArgs
    ) -> SandboxCall[RelayResult]:
        """POST .../relay: the port, the text and the options, flat, as JSON."""
        options = relay_options(options, changes)
        body = {"port": port, "data": data, **options.model_dump(mode="json")}
        timeout = options.timeout_s + REPLY_GRACE_S
        return SandboxCall("POST", self._url + "/relay", _relay_result, {"json": body, "timeout": timeout})

    def _reset_call(self) -> SandboxCall[None]:
        return SandboxCall("POST", self._url + "/reset_processes", _nothing)

    def _write_call(self, path: str, data: bytes | str, mode: int) -> SandboxCall[None]:
        params = {"path": path, "mode": mode}
        kwargs = {"params": params, "content": as_bytes(data)}
        return SandboxCall("PUT", self._url + "/files", _nothing, kwargs)

    def _read_call(self, path: str, archive: bool = False) -> SandboxCall[bytes]:
        params: dict[str, Any] = {"path": path, "archive": True} if archive else {"path": path}
        return SandboxCall("GET", self._url + "/files", _content, {"params": params})

    def _put_archive_call(self, path: str, tar_bytes: bytes) -> SandboxCall[None]:
        params = {"path": path, "archive": True}
        return SandboxCall("PUT", self._url + "/files", _nothing, {"params": params, "content": tar_bytes})

    def _delete_call(self) -> SandboxCall[None]:
        return SandboxCall("DELETE", self._url, _nothing, tolerate=(404,))


class _ClientRequests:
    """The request core of both clients: creating, finding and listing sandboxes, each as a `SandboxCall`."""

    @staticmethod
    def _create_call(
        image: str | None, files: Mapping[str, bytes | str] | None, changes: SpecArgs
    ) -> SandboxCall[SandboxInfo]:
        """Only what was given travels: the server fills in the rest from its own defaults."""
        body: dict[str, Any] = spec_changes(image, changes)
        body["files"] = {p: base64.b64encode(as_bytes(d)).decode() for p, d in (files or {}).items()}
        return SandboxCall("POST", "/v1/sandboxes", _info, {"json": body})

    @staticmethod
    def _get_call(sandbox_id: str) -> SandboxCall[SandboxInfo]:
        return SandboxCall("GET", f"/v1/sandboxes/{sandbox_id}", _info)

    @staticmethod
    def _list_call() -> SandboxCall[SandboxInfos]:
        return SandboxCall("GET", "/v1/sandboxes", _infos)


class RemoteSandbox(_SandboxRequests):
    """A sandbox on a server, reached over HTTP; the same methods as `Sandbox`."""

    def __init__(self, http: httpx.Client, info: SandboxInfo):
        super().__init__(info)
        self._http = http

    def _send(self, call: SandboxCall[T]) -> T:
        return call.result(self._http.request(call.method, call.url, **call.kwargs))

    def exec(
        self, command: str, options: ExecOptions | None = None, **changes: Unpack[ExecArgs]
    ) -> ExecResult:
        """`Sandbox.exec`, on the server."""
        return self._send(self._command_call(command, options, changes))

    def run_code(self, code: str, language: str = "python", options: ExecOptions | None = None,
                 **changes: Unpack[ExecArgs]) -> ExecResult:
        """`Sandbox.run_code`, on the server."""
        return self._send(self._code_call(code, language, options, changes))

    def relay(
        self, port: int, data: str, options: RelayOptions | None = None, **changes: Unpack[RelayArgs]
    ) -> RelayResult:
        """`Sandbox.relay`, on the server."""
        return self._send(self._relay_call(port, data, options, changes))

    def reset_processes(self) -> None:
        """Kill every process of the sandbox's user (kept ones and the session shell included)."""
        self._send(self._reset_call())

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        self._send(self._write_call(path, data, mode))

    def read_file(self, path: str) -> bytes:
        return self._send(self._read_call(path))

    def put_archive(self, path: str, tar_bytes: bytes) -> None:
        self._send(self._put_archive_call(path, tar_bytes))

    def get_archive(self, path: str) -> bytes:
        return self._send(self._read_call(path, archive=True))

    def close(self) -> None:
        """Delete the sandbox (one already gone is no error)."""
        self._send(self._delete_call())

    def __enter__(self) -> RemoteSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncRemoteSandbox(_SandboxRequests):
    """The async twin of `RemoteSandbox`: the same methods, as coroutines (and `aclose`)."""

    def __init__(self, http: httpx.AsyncClient, info: SandboxInfo):
        super().__init__(info)
        self._http = http

    async def _send(self, call: SandboxCall[T]) -> T:
        return call.result(await self._http.request(call.method, call.url, **call.kwargs))

    async def exec(
        self, command: str, options: ExecOptions | None = None, **changes: Unpack[ExecArgs]
    ) -> ExecResult:
        """`Sandbox.exec`, on the server."""
        return await self._send(self._command_call(command, options, changes))

    async def run_code(self, code: str, language: str = "python", options: ExecOptions | None = None,
                       **changes: Unpack[ExecArgs]) -> ExecResult:
        """`Sandbox.run_code`, on the server."""
        return await self._send(self._code_call(code, language, options, changes))

    async def relay(
        self, port: int, data: str, options: RelayOptions | None = None, **changes: Unpack[RelayArgs]
    ) -> RelayResult:
        """`Sandbox.relay`, on the server."""
        return await self._send(self._relay_call(port, data, options, changes))

    async def reset_processes(self) -> None:
        """Kill every process of the sandbox's user (kept ones and the session shell included)."""
        await self._send(self._reset_call())

    async def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        await self._send(self._write_call(path, data, mode))

    async def read_file(self, path: str) -> bytes:
        return await self._send(self._read_call(path))

    async def put_archive(self, path: str, tar_bytes: bytes) -> None:
        await self._send(self._put_archive_call(path, tar_bytes))

    async def get_archive(self, path: str) -> bytes:
        return await self._send(self._read_call(path, archive=True))

    async def aclose(self) -> None:
        """Delete the sandbox (one already gone is no error)."""
        await self._send(self._delete_call())

    async def __aenter__(self) -> AsyncRemoteSandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class SandboxClient(_ClientRequests):
    """Creates sandboxes on a sandbox server: `SandboxClient(url).create(...)` -> `RemoteSandbox`."""

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 120.0):
        self.http = httpx.Client(base_url=base_url, headers=_headers(token), timeout=timeout)

    def _send(self, call: SandboxCall[T]) -> T:
        return call.result(self.http.request(call.method, call.url, **call.kwargs))

    def create(
        self,
        image: str | None = None,
        *,
        files: Mapping[str, bytes | str] | None = None,
        **changes: Unpack[SpecArgs],
    ) -> RemoteSandbox:
        """A new sandbox; what is left out comes from the server's defaults. `files`: path -> content."""
        return RemoteSandbox(self.http, self._send(self._create_call(image, files, changes)))

    def get(self, sandbox_id: str) -> RemoteSandbox:
        """An open sandbox of this client's tenant, by id."""
        return RemoteSandbox(self.http, self._send(self._get_call(sandbox_id)))

    def list(self) -> SandboxInfos:
        """The open sandboxes of this client's tenant."""
        return self._send(self._list_call())

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> SandboxClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncSandboxClient(_ClientRequests):
    """The async twin of `SandboxClient`."""

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 120.0):
        self.http = httpx.AsyncClient(base_url=base_url, headers=_headers(token), timeout=timeout)

    async def _send(self, call: SandboxCall[T]) -> T:
        return call.result(await self.http.request(call.method, call.url, **call.kwargs))

    async def create(
        self,
        image: str | None = None,
        *,
        files: Mapping[str, bytes | str] | None = None,
        **changes: Unpack[SpecArgs],
    ) -> AsyncRemoteSandbox:
        """A new sandbox; what is left out comes from the server's defaults. `files`: path -> content."""
        return AsyncRemoteSandbox(self.http, await self._send(self._create_call(image, files, changes)))

    async def get(self, sandbox_id: str) -> AsyncRemoteSandbox:
        """An open sandbox of this client's tenant, by id."""
        return AsyncRemoteSandbox(self.http, await self._send(self._get_call(sandbox_id)))

    async def list(self) -> SandboxInfos:
        """The open sandboxes of this client's tenant."""
        return await self._send(self._list_call())

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncSandboxClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
