"""The episode API's errors: the stable code an error answer carries (`ErrorCode`) and the typed
exception a client raises for each (`error_from`), apart from the shapes and codec of
`agentrl.protocol`, which imports them from here so that clients and server still reach every
name of the wire format through that one module.
"""

from __future__ import annotations

from typing import Any

from agentrl.core.base import EpisodeOverError as LocalEpisodeOverError

__all__ = [
    "CapacityError",
    "EpisodeEndedError",
    "EpisodeOverError",
    "ErrorCode",
    "InvalidRequestError",
    "RemoteEnvError",
    "ServerError",
    "ShuttingDownError",
    "UnauthorizedError",
    "UnknownEnvError",
    "UnknownEpisodeError",
    "error_from",
]


class ErrorCode:
    """Stable error codes; the HTTP status says the class of error, the code says which."""

    INVALID_REQUEST = "invalid_request"  # 400/422: malformed JSON, wrong types
    ACTION_TOO_LARGE = "action_too_large"  # 413
    BODY_TOO_LARGE = "body_too_large"  # 413
    UNAUTHORIZED = "unauthorized"  # 401
    UNKNOWN_ENV = "unknown_env"  # 404
    UNKNOWN_EPISODE = "unknown_episode"  # 404: never made here, or lost with a restarted server
    EPISODE_CLOSED = "episode_closed"  # 404: a client closed it; it does not come back
    EPISODE_EXPIRED = "episode_expired"  # 404: the server closed it (idle past its TTL, or too old)
    EPISODE_OVER = "episode_over"  # 409
    ENV_REJECTED = "env_rejected"  # 400: the env refused its constructor arguments or reset options
    CAPACITY = "capacity"  # 429
    SHUTTING_DOWN = "shutting_down"  # 503
    ENV_ERROR = "env_error"  # 500: the env itself raised while stepping (a bug in the env)
    NOT_FOUND = "not_found"  # 404 for unknown routes


# --- the typed errors an error code becomes, in a client --------------------------------------------
class ServerError(Exception):
    """An error answered by the server; `code` is one of `ErrorCode`."""

    def __init__(self, status: int, code: str, message: str, retry_after: float | None = None):
        super().__init__(f"[{status} {code}] {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


class InvalidRequestError(ServerError):
    """The request was malformed, too large, or the env refused its arguments."""


class UnauthorizedError(ServerError):
    """Missing or wrong bearer token."""


class UnknownEnvError(ServerError):
    """The server does not serve this env id."""


class UnknownEpisodeError(ServerError):
    """The episode never existed, was closed, or expired (idle TTL or max age)."""


class EpisodeEndedError(UnknownEpisodeError):
    """The episode was closed by a client (`episode_closed`) or expired (`episode_expired`): gone for
    good. Unlike an `unknown_episode`, which a cluster client takes for a lost server and replays,
    this one is raised to the caller: a closed episode never comes back. A cluster client raises it
    too (`episode_expired`) for an episode lost once, by its own clocks against the TTLs its server
    answered at create, the episode may have expired (`agentrl.client.cluster`)."""


class EpisodeOverError(ServerError, LocalEpisodeOverError):
    """Step after the episode ended; also an `agentrl.core.EpisodeOverError`, as locally."""


class CapacityError(ServerError):
    """The server holds its maximum of live episodes; `retry_after` says when to try again."""


class ShuttingDownError(ServerError):
    """The server is shutting down and takes no new episodes."""


class RemoteEnvError(ServerError):
    """The env raised while stepping: a bug in the env, not in the request."""


_BY_CODE: dict[str, type[ServerError]] = {
    ErrorCode.UNAUTHORIZED: UnauthorizedError,
    ErrorCode.UNKNOWN_ENV: UnknownEnvError,
    ErrorCode.UNKNOWN_EPISODE: UnknownEpisodeError,
    ErrorCode.EPISODE_CLOSED: EpisodeEndedError,
    ErrorCode.EPISODE_EXPIRED: EpisodeEndedError,
    ErrorCode.EPISODE_OVER: EpisodeOverError,
    ErrorCode.CAPACITY: CapacityError,
    ErrorCode.SHUTTING_DOWN: ShuttingDownError,
    ErrorCode.ENV_ERROR: RemoteEnvError,
}


def error_from(status: int, body: Any, retry_after: float | None = None) -> ServerError:
    """The typed error of an answer with `status` >= 400 and `body` (an `ErrorBody`, or whatever a
    proxy in between answered)."""
    code, message = "unknown", str(body)[:500]
    if isinstance(body, dict):
        code = str(body.get("error", code))
        message = str(body.get("message", body.get("detail", message)))
    cls = _BY_CODE.get(code, InvalidRequestError if 400 <= status < 500 else ServerError)
    return cls(status, code, message, retry_after)
