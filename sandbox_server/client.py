"""HTTP clients of the sandbox server: `SandboxClient` (sync) and `AsyncSandboxClient`, httpx twins.

Their sandboxes have the same methods as the in-process ones (`Sandbox`), so code moves between a
local Docker engine and a remote server by changing one line.
"""

from __future__ import annotations

import base64
from typing import Any

import httpx

from agentrl.sandbox_server.errors import CapacityError, InvalidRequest, SandboxError, SandboxNotFound
from agentrl.sandbox_server.models import ExecMode, ExecResult, SandboxInfo
from agentrl.sandbox_server.sandbox import as_bytes

_BY_KIND: dict[str, type[SandboxError]] = {
    "sandbox_not_found": SandboxNotFound,
    "capacity": CapacityError,
    "invalid": InvalidRequest,
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
    raise _BY_KIND.get(kind, SandboxError)(f"HTTP {response.status_code}: {detail}")


def _create_body(kwargs: dict[str, Any]) -> dict[str, Any]:
    files = kwargs.pop("files", None) or {}
    body = {k: v for k, v in kwargs.items() if v is not None}
    body["files"] = {path: base64.b64encode(as_bytes(data)).decode() for path, data in files.items()}
    return body


def _exec_body(command: str, stdin: str | bytes | None, **fields: Any) -> dict[str, Any]:
    if isinstance(stdin, bytes):
        stdin = stdin.decode()
    return {"command": command, "stdin": stdin, **fields}


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


class RemoteSandbox:
    """A sandbox on a server; same methods as `Sandbox`."""

    def __init__(self, client: SandboxClient, info: SandboxInfo):
        self._client = client
        self.info = info
        self.sandbox_id = info.sandbox_id
        self._url = f"/v1/sandboxes/{info.sandbox_id}"

    def __enter__(self) -> RemoteSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        response = self._client.http.request(method, self._url + url, **kwargs)
        _raise_for(response)
        return response

    def exec(
        self,
        command: str,
        *,
        timeout_s: float = 30.0,
        idle_timeout_s: float | None = None,
        stdin: str | bytes | None = None,
        mode: ExecMode = "session",
        max_output_bytes: int = 65536,
    ) -> ExecResult:
        body = _exec_body(
            command,
            stdin,
            timeout_s=timeout_s,
            idle_timeout_s=idle_timeout_s,
            mode=mode,
            max_output_bytes=max_output_bytes,
        )
        return ExecResult.model_validate_json(
            self._request("POST", "/exec", json=body, timeout=timeout_s + 60.0).content
        )

    def run_code(
        self,
        code: str,
        language: str = "python",
        *,
        timeout_s: float = 30.0,
        stdin: str | bytes | None = None,
        max_output_bytes: int = 65536,
    ) -> ExecResult:
        body = {
            "code": code,
            "language": language,
            "timeout_s": timeout_s,
            "max_output_bytes": max_output_bytes,
            "stdin": stdin.decode() if isinstance(stdin, bytes) else stdin,
        }
        return ExecResult.model_validate_json(
            self._request("POST", "/exec", json=body, timeout=timeout_s + 60.0).content
        )

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        self._request("PUT", "/files", params={"path": path, "mode": mode}, content=as_bytes(data))

    def read_file(self, path: str) -> bytes:
        return self._request("GET", "/files", params={"path": path}).content

    def put_archive(self, path: str, tar_bytes: bytes) -> None:
        self._request("PUT", "/files", params={"path": path, "archive": True}, content=tar_bytes)

    def get_archive(self, path: str) -> bytes:
        return self._request("GET", "/files", params={"path": path, "archive": True}).content

    def close(self) -> None:
        response = self._client.http.delete(self._url)
        if response.status_code != 404:
            _raise_for(response)


class SandboxClient:
    """Creates sandboxes on a sandbox server: `SandboxClient(url).create(...)` -> `RemoteSandbox`."""

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 120.0):
        self.http = httpx.Client(base_url=base_url, headers=_headers(token), timeout=timeout)

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
    ) -> RemoteSandbox:
        body = _create_body(
            dict(
                image=image,
                cpus=cpus,
                memory_mb=memory_mb,
                pids=pids,
                disk_mb=disk_mb,
                ttl_s=ttl_s,
                idle_ttl_s=idle_ttl_s,
                env=env,
                files=files,
            )
        )
        response = self.http.post("/v1/sandboxes", json=body)
        _raise_for(response)
        return RemoteSandbox(self, SandboxInfo.model_validate_json(response.content))

    def get(self, sandbox_id: str) -> RemoteSandbox:
        response = self.http.get(f"/v1/sandboxes/{sandbox_id}")
        _raise_for(response)
        return RemoteSandbox(self, SandboxInfo.model_validate_json(response.content))

    def list(self) -> list[SandboxInfo]:
        response = self.http.get("/v1/sandboxes")
        _raise_for(response)
        return [SandboxInfo.model_validate(item) for item in response.json()]

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> SandboxClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncRemoteSandbox:
    """The async twin of `RemoteSandbox`: the same methods, as coroutines."""

    def __init__(self, client: AsyncSandboxClient, info: SandboxInfo):
        self._client = client
        self.info = info
        self.sandbox_id = info.sandbox_id
        self._url = f"/v1/sandboxes/{info.sandbox_id}"

    async def __aenter__(self) -> AsyncRemoteSandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        response = await self._client.http.request(method, self._url + url, **kwargs)
        _raise_for(response)
        return response

    async def exec(
        self,
        command: str,
        *,
        timeout_s: float = 30.0,
        idle_timeout_s: float | None = None,
        stdin: str | bytes | None = None,
        mode: ExecMode = "session",
        max_output_bytes: int = 65536,
    ) -> ExecResult:
        body = _exec_body(
            command,
            stdin,
            timeout_s=timeout_s,
            idle_timeout_s=idle_timeout_s,
            mode=mode,
            max_output_bytes=max_output_bytes,
        )
        response = await self._request("POST", "/exec", json=body, timeout=timeout_s + 60.0)
        return ExecResult.model_validate_json(response.content)

    async def run_code(
        self,
        code: str,
        language: str = "python",
        *,
        timeout_s: float = 30.0,
        stdin: str | bytes | None = None,
        max_output_bytes: int = 65536,
    ) -> ExecResult:
        body = {
            "code": code,
            "language": language,
            "timeout_s": timeout_s,
            "max_output_bytes": max_output_bytes,
            "stdin": stdin.decode() if isinstance(stdin, bytes) else stdin,
        }
        response = await self._request("POST", "/exec", json=body, timeout=timeout_s + 60.0)
        return ExecResult.model_validate_json(response.content)

    async def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        await self._request("PUT", "/files", params={"path": path, "mode": mode}, content=as_bytes(data))

    async def read_file(self, path: str) -> bytes:
        return (await self._request("GET", "/files", params={"path": path})).content

    async def put_archive(self, path: str, tar_bytes: bytes) -> None:
        await self._request("PUT", "/files", params={"path": path, "archive": True}, content=tar_bytes)

    async def get_archive(self, path: str) -> bytes:
        return (await self._request("GET", "/files", params={"path": path, "archive": True})).content

    async def aclose(self) -> None:
        response = await self._client.http.delete(self._url)
        if response.status_code != 404:
            _raise_for(response)


class AsyncSandboxClient:
    """The async twin of `SandboxClient`."""

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 120.0):
        self.http = httpx.AsyncClient(base_url=base_url, headers=_headers(token), timeout=timeout)

    async def create(
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
    ) -> AsyncRemoteSandbox:
        body = _create_body(
            dict(
                image=image,
                cpus=cpus,
                memory_mb=memory_mb,
                pids=pids,
                disk_mb=disk_mb,
                ttl_s=ttl_s,
                idle_ttl_s=idle_ttl_s,
                env=env,
                files=files,
            )
        )
        response = await self.http.post("/v1/sandboxes", json=body)
        _raise_for(response)
        return AsyncRemoteSandbox(self, SandboxInfo.model_validate_json(response.content))

    async def list(self) -> list[SandboxInfo]:
        response = await self.http.get("/v1/sandboxes")
        _raise_for(response)
        return [SandboxInfo.model_validate(item) for item in response.json()]

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncSandboxClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
