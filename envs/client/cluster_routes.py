"""The drivers of a cluster client's routing (`agentrl.client.cluster.Router`): each sends the requests
the router yields over a client per holder, blocking (`SyncRoutes`) or awaiting (`AsyncRoutes`), and
sends the router their outcomes (`agentrl.serving.flows.drive`, as the sandbox cluster client's)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from agentrl.client.cluster import Pause, ReplayStats, Request, Router
from agentrl.client.wire import Call
from agentrl.protocol import CLUSTER_PATH, ServerError
from agentrl.serving.flows import drive, drive_async

_CAUGHT = (ServerError, httpx.TransportError)  # outcomes the router judges: a holder gone is replayed


def _discovery_base(url: str) -> str:
    return url.rstrip("/")[: -len(CLUSTER_PATH)]


class SyncRoutes:
    """A sync client's routes over a cluster: the router, and a client per holder made by `connect`."""

    def __init__(self, discovery_url: str, connect: Callable[[str], Any]) -> None:
        self.router = Router(discovery_url)
        self.connect = connect
        self.clients: dict[str | None, Any] = {None: connect(_discovery_base(discovery_url))}
        self._lock = threading.Lock()

    @property
    def stats(self) -> ReplayStats:
        return self.router.stats

    def _send(self, url: str | None, call: Call[Any]) -> Any:
        client = self.clients.get(url)
        if client is None:
            with self._lock:
                client = self.clients.get(url) or self.clients.setdefault(url, self.connect(url))  # type: ignore[arg-type]  # None: made at start
        return client._run(call)

    def _do(self, request: Request) -> Any:
        target, call = request
        if isinstance(call, Pause):
            return time.sleep(call.seconds)
        return self._send(target, call)

    def run(self, call: Call[Any]) -> Any:
        return drive(self.router.route(call), self._do, _CAUGHT)

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


class AsyncRoutes:
    """An async client's routes over a cluster; as `SyncRoutes`, awaiting each request."""

    def __init__(self, discovery_url: str, connect: Callable[[str], Any]) -> None:
        self.router = Router(discovery_url)
        self.connect = connect
        self.clients: dict[str | None, Any] = {None: connect(_discovery_base(discovery_url))}

    @property
    def stats(self) -> ReplayStats:
        return self.router.stats

    async def _do(self, request: Request) -> Any:
        target, call = request
        if isinstance(call, Pause):
            return await asyncio.sleep(call.seconds)
        client = self.clients.get(target)
        if client is None:
            client = self.clients[target] = self.connect(target)  # type: ignore[arg-type]  # None: made at start
        return await client._run(call)

    async def run(self, call: Call[Any]) -> Any:
        return await drive_async(self.router.route(call), self._do, _CAUGHT)

    async def aclose(self) -> None:
        for client in self.clients.values():
            await client.aclose()
