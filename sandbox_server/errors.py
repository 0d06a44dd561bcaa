"""Errors of the sandbox layer; each knows the HTTP status and `kind` it travels as."""

from __future__ import annotations

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
    """A sandbox operation failed; the message says why."""

    http_status = 500
    kind = "sandbox_error"


class SandboxNotFound(SandboxError):
    """No such sandbox: never created, deleted, or reaped by its TTL."""

    http_status = 404
    kind = "sandbox_not_found"


class CapacityError(SandboxError):
    """The backend holds as many sandboxes as it may."""

    http_status = 503
    kind = "capacity"


class QuotaExceeded(CapacityError):
    """The tenant holds as many sandboxes (its /run_code calls under way included) as its quota allows."""

    http_status = 429
    kind = "quota"


class TooLarge(SandboxError):
    """The request carries or asks for more than the server's operator allows."""

    http_status = 413
    kind = "too_large"


class DockerUnavailable(SandboxError):
    """No Docker engine could be reached, or the sandbox image is missing."""

    http_status = 503
    kind = "docker_unavailable"

    def __init__(self, detail: str = ""):
        super().__init__(f"{detail}\n{DOCKER_HOWTO}" if detail else DOCKER_HOWTO)


class InvalidRequest(SandboxError):
    """The request cannot be carried out as asked (bad path, unsupported language, ...)."""

    http_status = 400
    kind = "invalid"


class SandboxDead(SandboxError):
    """The sandbox's container died, was paused or broke its protocol; only DELETE still works on it."""

    http_status = 410
    kind = "sandbox_dead"


class Busy(SandboxError):
    """The sandbox already has as many calls running or waiting as it may."""

    http_status = 429
    kind = "too_many_requests"


class Forbidden(SandboxError):
    """The server's operator does not allow this (an image off the allow-list)."""

    http_status = 403
    kind = "forbidden"
