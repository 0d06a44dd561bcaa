"""HTTP clients of the sandbox server: `SandboxClient` (sync) and `AsyncSandboxClient`, httpx twins.

Both are one implementation: every operation is written once, as a `Call` (the HTTP request and how
to read its answer), and each twin only sends calls its way, so the two cannot drift apart. Their
sandboxes have the same methods as the in-process ones (`Sandbox`), so code moves between a local
Docker engine and a remote server by changing one line.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx

from agentrl.sandbox_server.errors import (
    Busy,
    CapacityError,
    Forbidden,
    InvalidRequest,
    QuotaExceeded,
    SandboxDead,
    SandboxError,
    SandboxNotFound,
    TooLarge,
)
from agentrl.sandbox_server.models import ExecMode, ExecResult, SandboxInfo
from agentrl.sandbox_server.sandbox import as_bytes

T = TypeVar("T")
_BY_KIND: dict[str, type[SandboxError]] = {
    "sandbox_not_found": SandboxNotFound,
    "capacity": CapacityError,
    "invalid": InvalidRequest,
    "sandbox_dead": SandboxDead,
    "too_many_requests": Busy,
    "forbidden": Forbidden,
    "quota": QuotaExceeded,
    "too_large": TooLarge,
}


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
    raise _BY_KIND.get(kind, SandboxError)(f"HTTP {response.status_code}: {detail}")


@dataclass
class Call(Generic[T]):
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


def _text(stdin: str | bytes | None) -> str | None:
    return stdin.decode() if isinstance(stdin, bytes) else stdin


class _SandboxCalls:
    """The operations on one remote sandbox, each as a `Call`."""

    sandbox_id: str

    def __init__(self, client: Any, info: SandboxInfo):
        self._client = client
        self.info = info
        self.sandbox_id = info.sandbox_id
        self._url = f"/v1/sandboxes/{info.sandbox_id}"

    def exec(
        self,
        command: str,
        *,
        timeout_s: float = 30.0,
        idle_timeout_s: float | None = None,
        stdin: str | bytes | None = None,
        mode: ExecMode = "session",
        max_output_bytes: int = 65536,
        keep_alive: bool = False,
    ) -> Call[ExecResult]:
        body = {
            "command": command,
            "stdin": _text(stdin),
            "timeout_s": timeout_s,
            "idle_timeout_s": idle_timeout_s,
            "mode": mode,
            "max_output_bytes": max_output_bytes,
            "keep_alive": keep_alive,
        }
        return Call("POST", self._url + "/exec", _exec_result, {"json": body, "timeout": timeout_s + 60.0})

    def run_code(
        self,
        code: str,
        language: str = "python",
        *,
        timeout_s: float = 30.0,
        stdin: str | bytes | None = None,
        max_output_bytes: int = 65536,
    ) -> Call[ExecResult]:
        body = {
            "code": code,
            "language": language,
            "timeout_s": timeout_s,
            "max_output_bytes": max_output_bytes,
            "stdin": _text(stdin),
        }
        return Call("POST", self._url + "/exec", _exec_result, {"json": body, "timeout": timeout_s + 60.0})

    def reset_processes(self) -> Call[None]:
        return Call("POST", self._url + "/reset_processes", _nothing)

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> Call[None]:
        params = {"path": path, "mode": mode}
        return Call("PUT", self._url + "/files", _nothing, {"params": params, "content": as_bytes(data)})

    def read_file(self, path: str) -> Call[bytes]:
        return Call("GET", self._url + "/files", _content, {"params": {"path": path}})

    def put_archive(self, path: str, tar_bytes: bytes) -> Call[None]:
        params = {"path": path, "archive": True}
        return Call("PUT", self._url + "/files", _nothing, {"params": params, "content": tar_bytes})

    def get_archive(self, path: str) -> Call[bytes]:
        return Call("GET", self._url + "/files", _content, {"params": {"path": path, "archive": True}})

    def delete(self) -> Call[None]:
        return Call("DELETE", self._url, _nothing, tolerate=(404,))


class _ClientCalls:
    """The operations of a client, each as a `Call`; `sandbox_class` wraps the sandboxes it returns."""

    sandbox_class: type

    def create(
        self,
        image: str | None = None,
        *,
        cpus: float | None = None,
        memory_mb: int | None = None,
        pids: int | None = None,
        disk_mb: int | None = None,
        ttl_s: float | None = None,
        idle_ttl_s: float | None = None,
        env: dict[str, str] | None = None,
        files: dict[str, bytes | str] | None = None,
    ) -> Call[Any]:
        given = {
            "image": image,
            "cpus": cpus,
            "memory_mb": memory_mb,
            "pids": pids,
            "disk_mb": disk_mb,
            "ttl_s": ttl_s,
            "idle_ttl_s": idle_ttl_s,
            "env": env,
        }
        body: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        body["files"] = {p: base64.b64encode(as_bytes(d)).decode() for p, d in (files or {}).items()}
        return Call("POST", "/v1/sandboxes", self._sandbox, {"json": body})

    def get(self, sandbox_id: str) -> Call[Any]:
        return Call("GET", f"/v1/sandboxes/{sandbox_id}", self._sandbox)

    def list(self) -> Call[list[SandboxInfo]]:
        return Call("GET", "/v1/sandboxes", lambda r: [SandboxInfo.model_validate(i) for i in r.json()])

    def _sandbox(self, response: httpx.Response) -> Any:
        return self.sandbox_class(self, SandboxInfo.model_validate_json(response.content))


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _sync(op: Callable[..., Call[T]], http: Callable[[Any], httpx.Client]) -> Callable[..., T]:
    @functools.wraps(op)
    def method(self: Any, *args: Any, **kwargs: Any) -> T:
        call = op(self, *args, **kwargs)
        return call.result(http(self).request(call.method, call.url, **call.kwargs))

    return method


def _async(op: Callable[..., Call[T]], http: Callable[[Any], httpx.AsyncClient]) -> Callable[..., Any]:
    @functools.wraps(op)
    async def method(self: Any, *args: Any, **kwargs: Any) -> T:
        call = op(self, *args, **kwargs)
        return call.result(await http(self).request(call.method, call.url, **call.kwargs))

    return method


SANDBOX_OPS = ("exec", "run_code", "reset_processes", "write_file", "read_file", "put_archive", "get_archive")
CLIENT_OPS = ("create", "get", "list")


class RemoteSandbox(_SandboxCalls):
    """A sandbox on a server; same methods as `Sandbox`."""

    def __enter__(self) -> RemoteSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncRemoteSandbox(_SandboxCalls):
    """The async twin of `RemoteSandbox`: the same methods, as coroutines (and `aclose`)."""

    async def __aenter__(self) -> AsyncRemoteSandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class SandboxClient(_ClientCalls):
    """Creates sandboxes on a sandbox server: `SandboxClient(url).create(...)` -> `RemoteSandbox`."""

    sandbox_class = RemoteSandbox

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 120.0):
        self.http = httpx.Client(base_url=base_url, headers=_headers(token), timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> SandboxClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncSandboxClient(_ClientCalls):
    """The async twin of `SandboxClient`."""

    sandbox_class = AsyncRemoteSandbox

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 120.0):
        self.http = httpx.AsyncClient(base_url=base_url, headers=_headers(token), timeout=timeout)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncSandboxClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _sandbox_http(sandbox: Any) -> Any:
    return sandbox._client.http


def _client_http(client: Any) -> Any:
    return client.http


for _name in SANDBOX_OPS:
    setattr(RemoteSandbox, _name, _sync(getattr(_SandboxCalls, _name), _sandbox_http))
    setattr(AsyncRemoteSandbox, _name, _async(getattr(_SandboxCalls, _name), _sandbox_http))
RemoteSandbox.close = _sync(_SandboxCalls.delete, _sandbox_http)  # type: ignore[attr-defined]
AsyncRemoteSandbox.aclose = _async(_SandboxCalls.delete, _sandbox_http)  # type: ignore[attr-defined]
for _name in CLIENT_OPS:
    setattr(SandboxClient, _name, _sync(getattr(_ClientCalls, _name), _client_http))
    setattr(AsyncSandboxClient, _name, _async(getattr(_ClientCalls, _name), _client_http))
