"""A standalone Docker sandbox server: containers as sessions.

Import-light: the names below load on first use, so `agentrl sandbox --help` stays fast.

    from agentrl.sandbox_server import DockerBackend
    with DockerBackend() as backend, backend.create() as sb:
        print(sb.exec("echo hi").stdout)
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Sandbox": "sandbox",
    "AgentSandbox": "sandbox",
    "Backend": "backend",
    "DockerBackend": "docker_backend",
    "LocalBackend": "local_backend",
    "SandboxClient": "client",
    "AsyncSandboxClient": "client",
    "RemoteSandbox": "client",
    "AsyncRemoteSandbox": "client",
    "SandboxCluster": "cluster",
    "AsyncSandboxCluster": "cluster",
    "SandboxLost": "cluster",
    "create_app": "app",
    "ExecResult": "models",
    "ExecOptions": "models",
    "SandboxSpec": "models",
    "SandboxInfo": "models",
    "DEFAULT_IMAGE": "models",
    "SandboxError": "errors",
    "SandboxNotFound": "errors",
    "CapacityError": "errors",
    "QuotaExceeded": "errors",
    "TooLarge": "errors",
    "DockerUnavailable": "errors",
    "InvalidRequest": "errors",
    "SandboxDead": "errors",
    "DiskFull": "errors",
    "Busy": "errors",
    "Forbidden": "errors",
}

__all__ = [  # the names of _EXPORTS, written out for the type checker (a test compares them)
    "DEFAULT_IMAGE",
    "AgentSandbox",
    "AsyncRemoteSandbox",
    "AsyncSandboxClient",
    "AsyncSandboxCluster",
    "Backend",
    "Busy",
    "CapacityError",
    "DiskFull",
    "DockerBackend",
    "DockerUnavailable",
    "ExecOptions",
    "ExecResult",
    "Forbidden",
    "InvalidRequest",
    "LocalBackend",
    "QuotaExceeded",
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
]

if TYPE_CHECKING:
    from agentrl.sandbox_server.app import create_app
    from agentrl.sandbox_server.backend import Backend
    from agentrl.sandbox_server.client import (
        AsyncRemoteSandbox,
        AsyncSandboxClient,
        RemoteSandbox,
        SandboxClient,
    )
    from agentrl.sandbox_server.cluster import AsyncSandboxCluster, SandboxCluster, SandboxLost
    from agentrl.sandbox_server.docker_backend import DockerBackend
    from agentrl.sandbox_server.errors import (
        Busy,
        CapacityError,
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
    from agentrl.sandbox_server.local_backend import LocalBackend
    from agentrl.sandbox_server.models import (
        DEFAULT_IMAGE,
        ExecOptions,
        ExecResult,
        SandboxInfo,
        SandboxSpec,
    )
    from agentrl.sandbox_server.sandbox import AgentSandbox, Sandbox


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
