"""One sandbox backend per process, shared by every caller that asks for the same one.

A worker process runs many episodes at once, each wanting a sandbox; they share one backend (the
in-process Docker backend, or the HTTP client of a sandbox server, or the cluster client when the
URL is the map of several, `.../v1/cluster`), so that its warm pool of pre-started containers
serves all of them and its connections are reused. Every backend made here is closed when the
process exits, which removes whatever containers are left.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from typing import Any

__all__ = ["shared_backend"]

_lock = threading.Lock()
_backends: dict[tuple[str | None, str | None, int], Any] = {}


def shared_backend(url: str | None = None, token: str | None = None, pool_size: int = 2) -> Any:
    """The process's backend for `url` (None: Docker in this process, with `pool_size` warm
    containers; a server's own pool size is its operator's) and `token`, made on first use."""
    key = (url, token, pool_size if url is None else -1)
    with _lock:
        backend = _backends.get(key)
        if backend is None:
            if url is None:
                from agentrl.sandbox_server.sandboxes.docker_backend import DockerBackend

                backend = DockerBackend(pool_size=pool_size)
            else:
                from agentrl.sandbox_server.clients.client import SandboxClient
                from agentrl.sandbox_server.clients.cluster import SandboxCluster, is_cluster

                cluster = is_cluster(url)
                backend = SandboxCluster(url, token=token) if cluster else SandboxClient(url, token=token)
            _backends[key] = backend
        return backend


@atexit.register
def _close_backends() -> None:
    with _lock:
        for backend in _backends.values():
            with contextlib.suppress(Exception):  # already gone: nothing left to free
                backend.close()
        _backends.clear()
