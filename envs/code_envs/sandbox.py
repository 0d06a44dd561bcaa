"""How Bash-v0 and Code-v0 get a sandbox: the sandbox server's in-process Docker backend, or its
HTTP client when a sandbox server URL is given (the cluster client when the URL is the map of several
sandbox servers, `.../v1/cluster`: their sandboxes are replayed into another server if theirs is lost).

One backend per process and pool size is shared by every env instance, so a warm pool of
pre-started containers serves all episodes of a worker; containers are destroyed when an episode
closes, and the backend removes whatever is left when the process exits.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrl.sandbox_server import Sandbox

__all__ = ["SandboxCrashed", "open_sandbox"]

_lock = threading.Lock()
_backends: dict[tuple[str | None, str | None, int], Any] = {}


class SandboxCrashed(RuntimeError):
    """The container is gone or unreachable; the episode cannot continue."""


def _backend(url: str | None, token: str | None, pool_size: int) -> Any:
    key = (url, token, pool_size if url is None else -1)
    with _lock:
        backend = _backends.get(key)
        if backend is None:
            if url is None:
                from agentrl.sandbox_server import DockerBackend

                backend = DockerBackend(pool_size=pool_size)
            else:
                from agentrl.sandbox_server import SandboxClient, SandboxCluster
                from agentrl.sandbox_server.clients.cluster import is_cluster

                # one server, or the map of several (`agentrl sandbox serve --processes N`: .../v1/cluster)
                cluster = is_cluster(url)
                backend = SandboxCluster(url, token=token) if cluster else SandboxClient(url, token=token)
            _backends[key] = backend
        return backend


def open_sandbox(
    *, url: str | None = None, token: str | None = None, pool_size: int = 2, **create: Any
) -> Sandbox:
    """A fresh sandbox; `create` goes to the backend's `create` (image, memory_mb, cpus, pids, ttl_s...)."""
    return _backend(url, token, pool_size).create(**create)


@atexit.register
def _close_backends() -> None:
    with _lock:
        for backend in _backends.values():
            with contextlib.suppress(Exception):  # already gone: nothing left to free
                backend.close()
        _backends.clear()
