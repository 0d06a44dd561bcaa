"""Clients of several sandbox servers behind one address: `SandboxCluster` and `AsyncSandboxCluster`.

Given the address of `agentrl sandbox serve --processes N` (or of one sandbox server per Ray node),
a cluster client reads the holder map (`GET /v1/cluster`, see `discovery.py`), creates each sandbox
on the usable holder with the fewest open sandboxes (its own creates counted at once, so a burst
spreads), and sends every call on a sandbox straight to its holder with that holder's own
`SandboxClient`: no process in between. The map is read again every `REFRESH_S` on a create, and
at once when a holder is lost. Its sandboxes have the methods of `RemoteSandbox`.

A lost holder loses no sandbox that can be rebuilt exactly. Each sandbox keeps its recipe: how it
was created and every call that can change it (exec, run_code, reset_processes, write_file,
put_archive), with a digest of each answer (an exec's status, exit code and output; not its
duration). When its holder is gone (connection refused or reset, or the sandbox answered as never
known after the holder restarted), the client creates a sandbox on another holder, replays the
calls, checks every answer against the one received before, then sends the call that failed: the
caller sees a slower call. Where an answer differs (the clock, process ids, random numbers, timing:
what `fork_divergence` lists for Bash-v0 and Code-v0 steps) the new sandbox is deleted and the call
raises `SandboxLost`, never carrying on in a different state.

The flows (create, a call with its replay) are written once as generators that yield each request
(`_Request`: on the map, a holder's client, or a sandbox) and are sent its outcome; the sync and
async twins only carry the requests out, as the env clients' router does.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import httpx

from agentrl.sandbox_server.client import AsyncSandboxClient, SandboxClient
from agentrl.sandbox_server.discovery import (
    CLUSTER_PATH,
    NEAR_ENV_VAR,
    SandboxClusterMap,
    SandboxHolderInfo,
    holder_of,
)
from agentrl.sandbox_server.errors import CapacityError, SandboxDead, SandboxError, SandboxNotFound
from agentrl.sandbox_server.models import ExecResult

__all__ = ["AsyncClusterSandbox", "AsyncSandboxCluster", "ClusterSandbox", "SandboxCluster", "SandboxLost"]

REFRESH_S = 2.0  # how old the holder map may be when a sandbox is created
LOST_GRACE_S = 2.0  # a holder this client lost takes no new sandbox for this long, whatever the map says
START_WAIT_S = 30.0  # how long a create waits for a server starting (a restart) when none is up
WAIT_S = 0.2  # between reads of the map meanwhile
MAX_TRIES = 3  # holders tried in turn for one create or one replay
# the operations of a remote sandbox (`RemoteSandbox`), and those of them that can change it
SANDBOX_OPS = ("exec", "run_code", "reset_processes", "write_file", "read_file", "put_archive", "get_archive")
CHANGING_OPS = frozenset({"exec", "run_code", "reset_processes", "write_file", "put_archive"})
Outcome = Any  # a request's result, or the exception it raised


class SandboxLost(SandboxDead):
    """A sandbox's server was lost and the sandbox could not be rebuilt exactly on another one.

    `reason` says why (an answer that differs on replay, no server left). Only DELETE still works
    on it (a no-op): it is a dead sandbox to its caller.
    """

    kind = "sandbox_lost"

    def __init__(self, sandbox_id: str, reason: str) -> None:
        super().__init__(f"sandbox {sandbox_id} was lost with its server: {reason}")
        self.sandbox_id = sandbox_id
        self.reason = reason


@dataclass
class _Request:
    """What a flow needs done: `on` is "map", "wait" (`WAIT_S`), "holder" (then `holder` names it)
    or "sandbox"."""

    on: str
    method: str = ""
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    holder: str = ""
    sandbox: Any = None


def _digest(result: Any) -> bytes | None:
    """What a replayed answer must equal: everything an exec answers but its duration."""
    if isinstance(result, ExecResult):
        text = result.model_dump_json(exclude={"duration_ms"})
    elif isinstance(result, bytes):
        return hashlib.blake2b(result, digest_size=16).digest()
    elif result is None:
        return None
    else:
        text = repr(result)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _holder_gone(outcome: Outcome) -> bool:
    """Whether an outcome says the sandbox's server is gone (or came back without its sandboxes)."""
    if isinstance(outcome, httpx.ReadTimeout | httpx.WriteTimeout | httpx.PoolTimeout):
        return False  # a slow answer from a server that may well be alive: the caller's to judge
    if isinstance(outcome, httpx.TransportError):
        return True
    return isinstance(outcome, SandboxNotFound) and str(outcome).endswith("no such sandbox")


class _Routes:
    """The holder map as last read and this client's own counts, no I/O: see the module docstring."""

    def __init__(self, url: str, near: str | None = None) -> None:
        self.near = near
        url = url.rstrip("/")
        self.base = url[: -len(CLUSTER_PATH)] if url.endswith(CLUSTER_PATH) else url
        self.map: dict[str, SandboxHolderInfo] = {}
        self.read_at = -1e9
        self.own: dict[str, int] = {}  # holder -> sandboxes this client created there and holds
        self.lost_at: dict[str, float] = {}

    def refresh(self, force: bool = False) -> Generator[_Request, Outcome, None]:
        if not force and time.monotonic() - self.read_at < REFRESH_S:
            return
        got = yield _Request("map")
        if isinstance(got, BaseException):
            raise got
        self.read_at = time.monotonic()
        self.map = {h.holder: h for h in got.holders}

    def _usable(self, name: str) -> bool:
        lost = self.lost_at.get(name)
        return self.map[name].state == "up" and (lost is None or time.monotonic() - lost > LOST_GRACE_S)

    def pick(self) -> Generator[_Request, Outcome, str]:
        """The usable holder with the fewest open sandboxes, this client's creates since the map
        was read counted."""
        yield from self.refresh()
        choices = [n for n in self.map if self._usable(n)]
        deadline = time.monotonic() + START_WAIT_S
        while not choices:  # a server restarting (or just lost) may be up again in a moment
            yield from self.refresh(force=True)
            choices = [n for n in self.map if self._usable(n)]
            waiting = any(h.state == "starting" or n in self.lost_at for n, h in self.map.items()
                          if h.state != "down")
            if choices or not waiting or time.monotonic() > deadline:
                break
            yield _Request("wait")
        if not choices:
            states = ", ".join(f"{h.holder}: {h.state}" for h in self.map.values()) or "none"
            raise CapacityError(f"no sandbox server of {self.base} is up (holders: {states})")
        if self.near is not None and self.near in choices:
            return self.near
        return min(choices, key=lambda n: (self.map[n].live_sandboxes + self.own.get(n, 0), n))

    def lose(self, name: str) -> None:
        self.lost_at[name] = time.monotonic()
        self.read_at = -1e9  # read the map again at the next pick

    def create(self, kwargs: dict[str, Any]) -> Generator[_Request, Outcome, tuple[str, Any]]:
        """A new sandbox on a usable holder: (its holder, the holder client's sandbox)."""
        got: Outcome = None
        for _ in range(MAX_TRIES):
            name = yield from self.pick()
            self.own[name] = self.own.get(name, 0) + 1  # counted now: creates in flight spread too
            got = yield _Request("holder", "create", kwargs=kwargs, holder=name)
            if isinstance(got, BaseException):
                self.drop(name)
                if isinstance(got, httpx.TransportError | CapacityError):
                    self.lose(name)
                    continue
                raise got
            return name, got
        assert isinstance(got, BaseException)
        raise got

    def drop(self, name: str) -> None:
        self.own[name] = max(0, self.own.get(name, 0) - 1)


class _Recipe:
    """One sandbox of a cluster client: where it is now and what rebuilds it."""

    def __init__(self, routes: _Routes, holder: str, inner: Any, create: dict[str, Any]) -> None:
        self.routes = routes
        self.holder = holder
        self.inner = inner  # the holder client's sandbox
        self.sandbox_id: str = inner.sandbox_id  # the id the caller knows, whatever holds it now
        self.create = create
        self.ops: list[tuple[str, tuple[Any, ...], dict[str, Any], bytes | None]] = []
        self.replays = 0
        self.lost: SandboxLost | None = None

    def call(self, method: str, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Generator[_Request, Outcome, Any]:
        if self.lost is not None:
            raise self.lost
        for attempt in range(MAX_TRIES + 1):
            got = yield _Request("sandbox", method, args, kwargs, sandbox=self.inner)
            if not _holder_gone(got):
                break
            self.routes.lose(self.holder)
            if attempt == MAX_TRIES:
                yield from self._give_up(f"its server was lost {MAX_TRIES + 1} times in a row")
            yield from self._replay()
        if isinstance(got, BaseException):
            raise got
        if method in CHANGING_OPS:
            self.ops.append((method, args, kwargs, _digest(got)))
        return got

    def close(self) -> Generator[_Request, Outcome, None]:
        self.routes.drop(self.holder)
        if self.lost is not None:
            return
        got = yield _Request("sandbox", "close", sandbox=self.inner)
        if isinstance(got, BaseException) and not _holder_gone(got):
            raise got

    def _replay(self) -> Generator[_Request, Outcome, None]:
        """Rebuild the sandbox on another holder from its recipe, checking every answer."""
        for _ in range(MAX_TRIES):
            try:
                name, fresh = yield from self.routes.create(self.create)
            except (httpx.TransportError, CapacityError) as exc:
                yield from self._give_up(f"no server could take its replay ({exc})")
            replayed = True
            for step, (method, args, kwargs, digest) in enumerate(self.ops, 1):
                got = yield _Request("sandbox", method, args, kwargs, sandbox=fresh)
                if _holder_gone(got):
                    self.routes.lose(name)
                    self.routes.drop(name)
                    replayed = False
                    break
                if isinstance(got, BaseException) or _digest(got) != digest:
                    yield _Request("sandbox", "close", sandbox=fresh)  # whatever it answers
                    self.routes.drop(name)
                    what = (f"{type(got).__name__}: {got}" if isinstance(got, BaseException)
                            else "a different answer")
                    yield from self._give_up(f"replayed on another server, call {step} ({method} "
                                             f"{str(args[0])[:60] if args else ''!r}) gave {what}: "
                                             "its result depends on more than the calls before it")
            if replayed:
                self.routes.drop(self.holder)
                self.holder, self.inner = name, fresh
                self.replays += 1
                return
        yield from self._give_up(f"no server could take its replay in {MAX_TRIES} tries")

    def _give_up(self, reason: str) -> Generator[_Request, Outcome, None]:
        self.routes.drop(self.holder)
        self.lost = SandboxLost(self.sandbox_id, reason)
        raise self.lost
        yield  # a generator, like every flow


def _drive_sync(flow: Generator[_Request, Outcome, Any], cluster: SandboxCluster) -> Any:
    try:
        request = next(flow)
        while True:
            try:
                outcome = cluster._do(request)
            except (SandboxError, httpx.TransportError) as exc:
                outcome = exc
            request = flow.send(outcome)
    except StopIteration as done:
        return done.value


async def _drive_async(flow: Generator[_Request, Outcome, Any], cluster: AsyncSandboxCluster) -> Any:
    try:
        request = next(flow)
        while True:
            try:
                outcome = await cluster._do(request)
            except (SandboxError, httpx.TransportError) as exc:
                outcome = exc
            request = flow.send(outcome)
    except StopIteration as done:
        return done.value


def _read_map(response: httpx.Response) -> SandboxClusterMap:
    if not response.is_success:
        raise SandboxError(f"HTTP {response.status_code} from {response.request.url}: {response.text[:300]}")
    return SandboxClusterMap.model_validate_json(response.content)


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


class _ClusterSandboxBase:
    """What both twins' sandboxes share: the id the caller knows, where it is now, its replays."""

    def __init__(self, cluster: Any, recipe: _Recipe) -> None:
        self._cluster = cluster
        self._recipe = recipe
        self.sandbox_id = recipe.sandbox_id

    @property
    def holder(self) -> str:
        """The server holding it now."""
        return self._recipe.holder

    @property
    def replays(self) -> int:
        """How often it was rebuilt on another server."""
        return self._recipe.replays

    @property
    def info(self) -> Any:
        """Its `SandboxInfo` on the server holding it now."""
        return self._recipe.inner.info


class ClusterSandbox(_ClusterSandboxBase):
    """A sandbox of a `SandboxCluster`: the methods of `RemoteSandbox` (exec, run_code,
    reset_processes, write_file, read_file, put_archive, get_archive, close), replayed elsewhere if
    its server is lost (see the module docstring)."""

    def close(self) -> None:
        _drive_sync(self._recipe.close(), self._cluster)

    def __enter__(self) -> ClusterSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
            return time.sleep(WAIT_S)
        if request.on == "map":
            return _read_map(self.http.get(self._routes.base + CLUSTER_PATH))
        target = self._client(request.holder) if request.on == "holder" else request.sandbox
        return getattr(target, request.method)(*request.args, **request.kwargs)

    def create(self, image: str | None = None, **kwargs: Any) -> ClusterSandbox:
        """A new sandbox on the least-loaded server (the arguments of `SandboxClient.create`)."""
        kwargs = {"image": image, **kwargs}
        holder, inner = _drive_sync(self._routes.create(kwargs), self)
        return ClusterSandbox(self, _Recipe(self._routes, holder, inner, kwargs))

    def get(self, sandbox_id: str) -> Any:
        """A sandbox by id, from the server its id names (not replayed if that server is lost)."""
        holder = holder_of(sandbox_id)
        if holder not in self._routes.map:
            _drive_sync(self._routes.refresh(force=True), self)
        if holder not in self._routes.map:
            raise SandboxNotFound(f"sandbox {sandbox_id}: its id names no server of {self._routes.base} "
                                  f"(servers: {', '.join(self._routes.map) or 'none'})")
        return self._client(holder).get(sandbox_id)  # type: ignore[arg-type]  # in the map: not None

    def list(self) -> list[Any]:
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


class AsyncClusterSandbox(_ClusterSandboxBase):
    """The async twin of `ClusterSandbox`: the same methods, as coroutines (and `aclose`)."""

    async def aclose(self) -> None:
        await _drive_async(self._recipe.close(), self._cluster)

    async def __aenter__(self) -> AsyncClusterSandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

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
            return await asyncio.sleep(WAIT_S)
        if request.on == "map":
            return _read_map(await self.http.get(self._routes.base + CLUSTER_PATH))
        target = self._client(request.holder) if request.on == "holder" else request.sandbox
        method = "aclose" if request.method == "close" else request.method
        return await getattr(target, method)(*request.args, **request.kwargs)

    async def create(self, image: str | None = None, **kwargs: Any) -> AsyncClusterSandbox:
        kwargs = {"image": image, **kwargs}
        holder, inner = await _drive_async(self._routes.create(kwargs), self)
        return AsyncClusterSandbox(self, _Recipe(self._routes, holder, inner, kwargs))

    async def get(self, sandbox_id: str) -> Any:
        holder = holder_of(sandbox_id)
        if holder not in self._routes.map:
            await _drive_async(self._routes.refresh(force=True), self)
        if holder not in self._routes.map:
            raise SandboxNotFound(f"sandbox {sandbox_id}: its id names no server of {self._routes.base} "
                                  f"(servers: {', '.join(self._routes.map) or 'none'})")
        return await self._client(holder).get(sandbox_id)  # type: ignore[arg-type]  # in the map: not None

    async def list(self) -> list[Any]:
        await _drive_async(self._routes.refresh(force=True), self)
        out = []
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


def _sync_op(name: str) -> Any:
    def op(self: ClusterSandbox, *args: Any, **kwargs: Any) -> Any:
        return _drive_sync(self._recipe.call(name, args, kwargs), self._cluster)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"`RemoteSandbox.{name}`, on the server holding the sandbox now."
    return op


def _async_op(name: str) -> Any:
    async def op(self: AsyncClusterSandbox, *args: Any, **kwargs: Any) -> Any:
        return await _drive_async(self._recipe.call(name, args, kwargs), self._cluster)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"`RemoteSandbox.{name}`, on the server holding the sandbox now."
    return op


for _name in SANDBOX_OPS:  # each through its sandbox's recipe
    setattr(ClusterSandbox, _name, _sync_op(_name))
    setattr(AsyncClusterSandbox, _name, _async_op(_name))


def is_cluster(url: str) -> bool:
    """Whether `url` names the map of several sandbox servers (it ends in `/v1/cluster`) rather than
    one server: told by the URL, as the env clients tell a cluster of env servers."""
    return url.rstrip("/").endswith(CLUSTER_PATH)
