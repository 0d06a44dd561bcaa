"""Clients of several sandbox servers behind one address: `SandboxCluster` and `AsyncSandboxCluster`.

Given the address of `agentrl sandbox serve --processes N` (or of one sandbox server per Ray node),
a cluster client reads the holder map (`GET /v1/cluster`, see `cluster/discovery.py`), creates each sandbox
on the usable holder with the fewest open sandboxes (its own creates counted at once, so a burst
spreads), and sends every call on a sandbox straight to its holder with that holder's own
`SandboxClient`: no process in between. The map is read again every `REFRESH_S` on a create, and
at once when a holder is lost. Its sandboxes (`ClusterSandbox`, `AsyncClusterSandbox`) have the
methods of `RemoteSandbox`, each written out in its class body, as the clients' are.

A lost holder loses no sandbox that can be rebuilt exactly. Each sandbox keeps its recipe: how it
was created and every call that can change it (exec, run_code, reset_processes, write_file,
put_archive), with a digest of each answer (an exec's status, exit code and output; not its
duration). When its holder is gone (connection refused or reset, or the sandbox answered as never
known after the holder restarted), the client creates a sandbox on another holder, replays the
calls, checks every answer against the one received before, then sends the call that failed: the
caller sees a slower call. Where an answer differs (the clock, process ids, random numbers, timing:
what `fork_divergence` lists for Bash-v0 and Code-v0 steps) the new sandbox is deleted and the call
raises `SandboxLost`, never carrying on in a different state.

The flows (create, a call with its replay) are written once, with no I/O, in `cluster_flows`: each
a generator that yields each request (on the map, a holder's client, or a sandbox) and is sent its
outcome; the sync and async twins here only carry the requests out (`agentrl.serving.flows.drive`),
as the env clients' router does.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Generator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from agentrl.sandbox_server.clients.client import (
    AsyncRemoteSandbox,
    AsyncSandboxClient,
    RemoteSandbox,
    SandboxClient,
    SandboxInfos,
)
from agentrl.sandbox_server.clients.cluster_flows import (
    RequestOutcome,
    SandboxLost,
    _Recipe,
    _Request,
    _Routes,
)
from agentrl.sandbox_server.cluster.discovery import (
    CLUSTER_PATH,
    NEAR_ENV_VAR,
    SandboxClusterMap,
    SandboxHolderInfo,
    holder_of,
)
from agentrl.sandbox_server.wire.errors import SandboxError, SandboxNotFound
from agentrl.sandbox_server.wire.models import (
    ExecArgs,
    ExecOptions,
    ExecResult,
    RelayArgs,
    RelayOptions,
    RelayResult,
    SandboxInfo,
    SpecArgs,
)
from agentrl.serving.flows import drive, drive_async

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack: Python 3.11+

T = TypeVar("T")
Flow = Generator[_Request, RequestOutcome, T]  # a flow of `cluster_flows` that ends in a T

__all__ = ["AsyncClusterSandbox", "AsyncSandboxCluster", "ClusterSandbox", "SandboxCluster", "SandboxLost"]


_CAUGHT = (SandboxError, httpx.TransportError)  # outcomes a flow judges: a server gone is replayed


def _drive_sync(flow: Flow[T], cluster: SandboxCluster) -> T:
    return drive(flow, cluster._do, _CAUGHT)


async def _drive_async(flow: Flow[T], cluster: AsyncSandboxCluster) -> T:
    return await drive_async(flow, cluster._do, _CAUGHT)


def _read_map(response: httpx.Response) -> SandboxClusterMap:
    if not response.is_success:
        raise SandboxError(f"HTTP {response.status_code} from {response.request.url}: {response.text[:300]}")
    return SandboxClusterMap.model_validate_json(response.content)


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


class _ClusterSandboxCore:
    """What both twins' sandboxes share: the id the caller knows, where it is now, its replays, and
    each call as a flow of its recipe (`cluster_flows._Recipe.call`), which the twins drive."""

    def __init__(self, recipe: _Recipe) -> None:
        self._recipe = recipe
        self.sandbox_id = recipe.sandbox_id

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.sandbox_id!r}, holder={self.holder!r})"

    @property
    def holder(self) -> str:
        """The server holding it now."""
        return self._recipe.holder

    @property
    def replays(self) -> int:
        """How often it was rebuilt on another server."""
        return self._recipe.replays

    @property
    def info(self) -> SandboxInfo:
        """Its `SandboxInfo` on the server holding it now."""
        return self._recipe.inner.info

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Flow[Any]:
        """`RemoteSandbox.<method>(*args, **kwargs)` on the holder, replayed elsewhere if it is lost."""
        return self._recipe.call(method, args, kwargs)


class ClusterSandbox(_ClusterSandboxCore):
    """A sandbox of a `SandboxCluster`: the methods of `RemoteSandbox`, replayed elsewhere if its
    server is lost (see the module docstring)."""

    def __init__(self, cluster: SandboxCluster, recipe: _Recipe) -> None:
        super().__init__(recipe)
        self._cluster = cluster

    def exec(
        self, command: str, options: ExecOptions | None = None, **changes: Unpack[ExecArgs]
    ) -> ExecResult:
        """`Sandbox.exec`, on the server holding the sandbox now."""
        return _drive_sync(self._call("exec", command, options, **changes), self._cluster)

    def run_code(self, code: str, language: str = "python", options: ExecOptions | None = None,
                 **changes: Unpack[ExecArgs]) -> ExecResult:
        """`Sandbox.run_code`, on the server holding the sandbox now."""
        return _drive_sync(self._call("run_code", code, language, options, **changes), self._cluster)

    def relay(
        self, port: int, data: str, options: RelayOptions | None = None, **changes: Unpack[RelayArgs]
    ) -> RelayResult:
        """`Sandbox.relay`, on the server holding the sandbox now."""
        return _drive_sync(self._call("relay", port, data, options, **changes), self._cluster)

    def reset_processes(self) -> None:
        """Kill every process of the sandbox's user (kept ones and the session shell included)."""
        _drive_sync(self._call("reset_processes"), self._cluster)

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        _drive_sync(self._call("write_file", path, data, mode), self._cluster)

    def read_file(self, path: str) -> bytes:
        return _drive_sync(self._call("read_file", path), self._cluster)

    def put_archive(self, path: str, tar_bytes: bytes) -> None:
        _drive_sync(self._call("put_archive", path, tar_bytes), self._cluster)

    def get_archive(self, path: str) -> bytes:
        return _drive_sync(self._call("get_archive", path), self._cluster)

    def close(self) -> None:
        """Delete the sandbox (one already gone, or lost with its server, is no error)."""
        _drive_sync(self._recipe.close(), self._cluster)

    def __enter__(self) -> ClusterSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClusterSandbox(_ClusterSandboxCore):
    """The async twin of `ClusterSandbox`: the same methods, as coroutines (and `aclose`)."""

    def __init__(self, cluster: AsyncSandboxCluster, recipe: _Recipe) -> None:
        super().__init__(recipe)
        self._cluster = cluster

    async def exec(
        self, command: str, options: ExecOptions | None = None, **changes: Unpack[ExecArgs]
    ) -> ExecResult:
        """`Sandbox.exec`, on the server holding the sandbox now."""
        return await _drive_async(self._call("exec", command, options, **changes), self._cluster)

    async def run_code(self, code: str, language: str = "python", options: ExecOptions | None = None,
                       **changes: Unpack[ExecArgs]) -> ExecResult:
        """`Sandbox.run_code`, on the server holding the sandbox now."""
        return await _drive_async(self._call("run_code", code, language, options, **changes), self._cluster)

    async def relay(
        self, port: int, data: str, options: RelayOptions | None = None, **changes: Unpack[RelayArgs]
    ) -> RelayResult:
        """`Sandbox.relay`, on the server holding the sandbox now."""
        return await _drive_async(self._call("relay", port, data, options, **changes), self._cluster)

    async def reset_processes(self) -> None:
        """Kill every process of the sandbox's user (kept ones and the session shell included)."""
        await _drive_async(self._call("reset_processes"), self._cluster)

    async def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        await _drive_async(self._call("write_file", path, data, mode), self._cluster)

    async def read_file(self, path: str) -> bytes:
        return await _drive_async(self._call("read_file", path), self._cluster)

    async def put_archive(self, path: str, tar_bytes: bytes) -> None:
        await _drive_async(self._call("put_archive", path, tar_bytes), self._cluster)

    async def get_archive(self, path: str) -> bytes:
        return await _drive_async(self._call("get_archive", path), self._cluster)

    async def aclose(self) -> None:
        """Delete the sandbox (one already gone, or lost with its server, is no error)."""
        await _drive_async(self._recipe.close(), self._cluster)

    async def __aenter__(self) -> AsyncClusterSandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class SandboxCluster:
    """Creates sandboxes on the servers behind one address: `SandboxCluster(url).create(...)`.

    Threads may share one (as the envs of a server's worker threads do). `url` is the address of
    `agentrl sandbox serve --processes N` (with or without `/v1/cluster`);
    `token` is sent to it and to every holder. `near` names a holder that takes every new sandbox
    while it is up (default: `$AGENTRL_SANDBOX_NEAR`, which an env server on Ray sets to its node's).
    """

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 120.0,
                 near: str | None = None) -> None:
        self._routes = _Routes(url, near if near is not None else os.environ.get(NEAR_ENV_VAR))
        self._token, self._timeout = token, timeout
        self.http = httpx.Client(headers=_headers(token), timeout=timeout)
        self._clients: dict[str, SandboxClient] = {}
        self._lock = threading.Lock()  # one client per holder, whatever threads share this one

    @property
    def holders(self) -> dict[str, SandboxHolderInfo]:
        return dict(self._routes.map)

    def _client(self, name: str) -> SandboxClient:
        client = self._clients.get(name)
        if client is None:
            with self._lock:
                client = self._clients.get(name)
                if client is None:
                    url = self._routes.map[name].url
                    client = SandboxClient(url, token=self._token, timeout=self._timeout)
                    self._clients[name] = client
        return client

    def _do(self, request: _Request) -> Any:
        if request.on == "wait":
            return time.sleep(request.seconds)
        if request.on == "map":
            return _read_map(self.http.get(self._routes.base + CLUSTER_PATH))
        target = self._client(request.holder) if request.on == "holder" else request.sandbox
        return getattr(target, request.method)(*request.args, **request.kwargs)

    def create(
        self,
        image: str | None = None,
        *,
        files: Mapping[str, bytes | str] | None = None,
        **changes: Unpack[SpecArgs],
    ) -> ClusterSandbox:
        """A new sandbox on the least-loaded server (the arguments of `SandboxClient.create`)."""
        kwargs = {"image": image, "files": files, **changes}
        holder, inner = _drive_sync(self._routes.create(kwargs), self)
        return ClusterSandbox(self, _Recipe(self._routes, holder, inner, kwargs))

    def get(self, sandbox_id: str) -> RemoteSandbox:
        """A sandbox by id, from the server its id names (not replayed if that server is lost)."""
        holder = holder_of(sandbox_id)
        if holder not in self._routes.map:
            _drive_sync(self._routes.refresh(force=True), self)
        if holder not in self._routes.map:
            raise SandboxNotFound(f"sandbox {sandbox_id}: its id names no server of {self._routes.base} "
                                  f"(servers: {', '.join(self._routes.map) or 'none'})")
        return self._client(holder).get(sandbox_id)  # type: ignore[arg-type]  # in the map: not None

    def list(self) -> SandboxInfos:
        """The caller's open sandboxes on every server that is up."""
        _drive_sync(self._routes.refresh(force=True), self)
        return [info for name, h in self._routes.map.items() if h.state == "up"
                for info in self._client(name).list()]

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self.http.close()

    def __enter__(self) -> SandboxCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncSandboxCluster:
    """The async twin of `SandboxCluster`."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 120.0,
                 near: str | None = None) -> None:
        self._routes = _Routes(url, near if near is not None else os.environ.get(NEAR_ENV_VAR))
        self._token, self._timeout = token, timeout
        self.http = httpx.AsyncClient(headers=_headers(token), timeout=timeout)
        self._clients: dict[str, AsyncSandboxClient] = {}

    @property
    def holders(self) -> dict[str, SandboxHolderInfo]:
        return dict(self._routes.map)

    def _client(self, name: str) -> AsyncSandboxClient:
        client = self._clients.get(name)
        if client is None:
            url = self._routes.map[name].url
            client = self._clients[name] = AsyncSandboxClient(url, token=self._token, timeout=self._timeout)
        return client

    async def _do(self, request: _Request) -> Any:
        if request.on == "wait":
            return await asyncio.sleep(request.seconds)
        if request.on == "map":
            return _read_map(await self.http.get(self._routes.base + CLUSTER_PATH))
        target = self._client(request.holder) if request.on == "holder" else request.sandbox
        method = "aclose" if request.method == "close" else request.method
        return await getattr(target, method)(*request.args, **request.kwargs)

    async def create(
        self,
        image: str | None = None,
        *,
        files: Mapping[str, bytes | str] | None = None,
        **changes: Unpack[SpecArgs],
    ) -> AsyncClusterSandbox:
        """A new sandbox on the least-loaded server (the arguments of `SandboxClient.create`)."""
        kwargs = {"image": image, "files": files, **changes}
        holder, inner = await _drive_async(self._routes.create(kwargs), self)
        return AsyncClusterSandbox(self, _Recipe(self._routes, holder, inner, kwargs))

    async def get(self, sandbox_id: str) -> AsyncRemoteSandbox:
        """A sandbox by id, from the server its id names (not replayed if that server is lost)."""
        holder = holder_of(sandbox_id)
        if holder not in self._routes.map:
            await _drive_async(self._routes.refresh(force=True), self)
        if holder not in self._routes.map:
            raise SandboxNotFound(f"sandbox {sandbox_id}: its id names no server of {self._routes.base} "
                                  f"(servers: {', '.join(self._routes.map) or 'none'})")
        return await self._client(holder).get(sandbox_id)  # type: ignore[arg-type]  # in the map: not None

    async def list(self) -> SandboxInfos:
        """The caller's open sandboxes on every server that is up."""
        await _drive_async(self._routes.refresh(force=True), self)
        out: SandboxInfos = []
        for name, h in self._routes.map.items():
            if h.state == "up":
                out += await self._client(name).list()
        return out

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        await self.http.aclose()

    async def __aenter__(self) -> AsyncSandboxCluster:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def is_cluster(url: str) -> bool:
    """Whether `url` names the map of several sandbox servers (it ends in `/v1/cluster`) rather than
    one server: told by the URL, as the env clients tell a cluster of env servers."""
    return url.rstrip("/").endswith(CLUSTER_PATH)
