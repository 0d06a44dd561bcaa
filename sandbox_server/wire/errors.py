"""Errors of the sandbox layer; each knows the HTTP status and `kind` it travels as."""

from __future__ import annotations

from typing import Any, ClassVar

DOCKER_HOWTO = (
    "agentrl sandboxes need a running Docker engine. Install it "
    "(Debian/Ubuntu: `sudo apt-get install -y docker.io`; "
    "elsewhere: https://docs.docker.com/engine/install/), "
    "start it (`sudo systemctl start docker` "
    "or `sudo dockerd &`), make sure your user may use it (`docker info` must work), then build the sandbox "
    "image with `bash docker/engine.sh` (it can also do all of the above). For development without "
    "isolation there is the opt-in local backend (`--backend local`)."
)


class SandboxError(RuntimeError):
    """A sandbox operation failed; the message says why.

    Each subclass names the HTTP status and the `kind` it travels as (`class X(SandboxError,
    status=404, kind="...")`), so the server answers with them and the clients raise the class
    again from the `kind` they read (`SandboxError.of_kind`).
    """

    http_status = 500
    kind = "sandbox_error"
    _by_kind: ClassVar[dict[str, type[SandboxError]]] = {}

    def __init_subclass__(cls, *, status: int | None = None, kind: str | None = None, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        if status is not None and kind is not None:
            cls.http_status, cls.kind = status, kind
            SandboxError._by_kind[kind] = cls

    @staticmethod
    def of_kind(kind: str) -> type[SandboxError]:
        """The error class that travels as `kind` (`SandboxError` for an unknown one)."""
        return SandboxError._by_kind.get(kind, SandboxError)


class SandboxNotFound(SandboxError, status=404, kind="sandbox_not_found"):
    """No such sandbox: never created, deleted, or reaped by its TTL."""


class AtCapacity(SandboxError, status=503, kind="capacity"):
    """The backend holds as many sandboxes as it may."""


class QuotaExceeded(AtCapacity, status=429, kind="quota"):
    """The tenant holds as many sandboxes (its /run_code calls under way included) as its quota allows."""


class TooLarge(SandboxError, status=413, kind="too_large"):
    """The request carries or asks for more than the server's operator allows."""


class DockerUnavailable(SandboxError, status=503, kind="docker_unavailable"):
    """No Docker engine could be reached, or the sandbox image is missing."""

    def __init__(self, detail: str = ""):
        super().__init__(f"{detail}\n{DOCKER_HOWTO}" if detail else DOCKER_HOWTO)


class InvalidRequest(SandboxError, status=400, kind="invalid"):
    """The request cannot be carried out as asked (bad path, unsupported language, ...)."""


class DiskFull(SandboxError, status=507, kind="disk_full"):
    """A write found a filesystem of the sandbox full: its /workspace (`disk_mb`), or the space the
    agent stages uploads in. The sandbox and every other one go on; freeing files makes room."""


class SandboxDead(SandboxError, status=410, kind="sandbox_dead"):
    """The sandbox's container died, was paused or broke its protocol; only DELETE still works on it."""


class Busy(SandboxError, status=429, kind="too_many_requests"):
    """The sandbox already has as many calls running or waiting as it may."""


class Forbidden(SandboxError, status=403, kind="forbidden"):
    """The server's operator does not allow this (an image off the allow-list)."""
