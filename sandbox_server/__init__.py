"""A standalone Docker sandbox server: containers as sessions.

Import-light: the names below load on first use, so `agentrl sandbox --help` stays fast. The
modules live in rooms, each importing only those before it: `wire/` (the API's shapes and errors),
`sandboxes/` (the protocol, the backends, the link to the in-container `agent/`), `api/` (the HTTP
server), `cluster/` (several servers behind one address) and `clients/` (of one server or several).

    from agentrl.sandbox_server import DockerBackend
    with DockerBackend() as backend, backend.create() as sb:
        print(sb.exec("echo hi").stdout)
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Sandbox": "sandboxes.sandbox",
    "AgentSandbox": "sandboxes.sandbox",
    "Backend": "sandboxes.backend",
    "DockerBackend": "sandboxes.docker_backend",
    "LocalBackend": "sandboxes.local_backend",
    "SandboxClient": "clients.client",
    "AsyncSandboxClient": "clients.client",
    "RemoteSandbox": "clients.client",
    "AsyncRemoteSandbox": "clients.client",
    "SandboxCluster": "clients.cluster",
    "AsyncSandboxCluster": "clients.cluster",
    "SandboxLost": "clients.cluster",
    "shared_backend": "clients.shared",
    "create_app": "api.app",
    "ExecResult": "wire.models",
    "ExecOptions": "wire.models",
    "RelayResult": "wire.models",
    "RelayOptions": "wire.models",
    "SandboxSpec": "wire.models",
    "SandboxInfo": "wire.models",
    "DEFAULT_IMAGE": "wire.models",
    "SandboxError": "wire.errors",
    "SandboxNotFound": "wire.errors",
    "AtCapacity": "wire.errors",
    "QuotaExceeded": "wire.errors",
    "TooLarge": "wire.errors",
    "DockerUnavailable": "wire.errors",
    "InvalidRequest": "wire.errors",
    "SandboxDead": "wire.errors",
    "DiskFull": "wire.errors",
    "Busy": "wire.errors",
    "Forbidden": "wire.errors",
}

__all__ = [  # the names of _EXPORTS, written out for the type checker (a test compares them)
    "DEFAULT_IMAGE",
    "AgentSandbox",
    "AsyncRemoteSandbox",
    "AsyncSandboxClient",
    "AsyncSandboxCluster",
    "AtCapacity",
    "Backend",
    "Busy",
    "DiskFull",
    "DockerBackend",
    "DockerUnavailable",
    "ExecOptions",
    "ExecResult",
    "Forbidden",
    "InvalidRequest",
    "LocalBackend",
    "QuotaExceeded",
    "RelayOptions",
    "RelayResult",
    "RemoteSandbox",
    "Sandbox",
    "SandboxClient",
    "SandboxCluster",
    "SandboxDead",
    "SandboxError",
    "SandboxInfo",
    "SandboxLost",
    "SandboxNotFound",
    "SandboxSpec",
    "TooLarge",
    "create_app",
    "shared_backend",
]

if TYPE_CHECKING:
    from agentrl.sandbox_server.api.app import create_app
    from agentrl.sandbox_server.clients.client import (
        AsyncRemoteSandbox,
        AsyncSandboxClient,
        RemoteSandbox,
        SandboxClient,
    )
    from agentrl.sandbox_server.clients.cluster import AsyncSandboxCluster, SandboxCluster, SandboxLost
    from agentrl.sandbox_server.clients.shared import shared_backend
    from agentrl.sandbox_server.sandboxes.backend import Backend
    from agentrl.sandbox_server.sandboxes.docker_backend import DockerBackend
    from agentrl.sandbox_server.sandboxes.local_backend import LocalBackend
    from agentrl.sandbox_server.sandboxes.sandbox import AgentSandbox, Sandbox
    from agentrl.sandbox_server.wire.errors import (
        AtCapacity,
        Busy,
        DiskFull,
        DockerUnavailable,
        Forbidden,
        InvalidRequest,
        QuotaExceeded,
        SandboxDead,
        SandboxError,
        SandboxNotFound,
        TooLarge,
    )
    from agentrl.sandbox_server.wire.models import (
        DEFAULT_IMAGE,
        ExecOptions,
        ExecResult,
        RelayOptions,
        RelayResult,
        SandboxInfo,
        SandboxSpec,
    )


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
