"""How Bash-v0 and Code-v0 get a sandbox: the sandbox server's in-process Docker backend, or its
HTTP client when a sandbox server URL is given (the cluster client when the URL is the map of several
sandbox servers, `.../v1/cluster`: their sandboxes are replayed into another server if theirs is lost).

The backend is the process's one (`agentrl.sandbox_server.shared_backend`), shared by every env
instance, so a warm pool of pre-started containers serves all episodes of a worker; containers are
destroyed when an episode closes, and the backend removes whatever is left when the process exits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrl.sandbox_server import Sandbox

__all__ = ["SandboxCrashed", "open_sandbox"]


class SandboxCrashed(RuntimeError):
    """The container is gone or unreachable; the episode cannot continue."""


def open_sandbox(
    *, url: str | None = None, token: str | None = None, pool_size: int = 2, **create: Any
) -> Sandbox:
    """A fresh sandbox; `create` goes to the backend's `create` (image, memory_mb, cpus, pids, ttl_s...)."""
    from agentrl.sandbox_server import shared_backend

    return shared_backend(url, token, pool_size).create(**create)
