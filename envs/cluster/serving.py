"""How every agentrl HTTP server runs under uvicorn: one config, so that each keeps the same promise
about idle connections to its clients.

The promise: a server keeps an idle keep-alive connection open longer than any client keeps it in
its pool, so it is always the client that closes one. With equal timers (uvicorn's default and
httpx's are both 5 s) a server can close a connection in the very moment a client sends a request
on it; the request is then lost in flight (`httpx.ReadError`, a reset), and a call that is not
idempotent, an exec or a step, cannot be sent again blindly. Under load the window is wide enough to
hit: 32 sandboxes with 100 execs each lost one call that way on a busy 2-core machine.

The config also bounds what a caller can make a server do before it is authenticated: the size and
time of a request's head, the stalls of a body, the connections held, and the open-files limit
(`agentrl.cluster.http_limits`, set by the `AGENTRL_HTTP_*` environment variables).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrl.cluster.http_limits import HttpLimits

__all__ = ["KEEP_ALIVE_S", "uvicorn_config"]

KEEP_ALIVE_S = 65
"""How long a server keeps an idle connection: past httpx's pool expiry (5 s), aiohttp's (15 s) and
the 60 s of common load balancers in front of a server. An idle connection costs a socket and a few
KiB; a request that dies in a race costs a step or an exec."""


def uvicorn_config(app: Any, *, host: str, port: int, log_level: str = "warning", access_log: bool = False,
                   limits: HttpLimits | None = None, **options: Any) -> Any:
    """A `uvicorn.Config` for `app` with the servers' keep-alive and `limits` (default: the
    `AGENTRL_HTTP_*` environment variables' or the defaults); `options` are uvicorn's own (WebSocket
    limits, graceful shutdown). Raises the open-files limit of this process, which is to serve `app`,
    and logs it. uvicorn loads here, not when this module is imported."""
    from agentrl.cluster.http_limits import MAX_CONNECTIONS_CAP, HttpLimits, LimitedConfig, open_files_limit

    before, files = open_files_limit()
    wanted = limits or HttpLimits.from_env()
    limits = wanted.fitted_to(files)
    config = LimitedConfig(app, limits=limits, host=host, port=port, log_level=log_level,
                           access_log=access_log, timeout_keep_alive=KEEP_ALIVE_S, **options)
    # logged after the config, which sets up uvicorn's loggers; loudly where the host's hard limit
    # leaves fewer files than twice the connections wanted (half of them are the app's)
    few = files < 2 * (wanted.max_connections or MAX_CONNECTIONS_CAP)
    logging.getLogger("uvicorn.error").log(
        logging.WARNING if few else logging.INFO,
        "open files: %d (%s)%s; at most %d connections, heads of %d bytes within %g s",
        files, f"raised from {before}" if files > before else "unchanged",
        ", the host's hard limit (ulimit -Hn)" if few else "", limits.max_connections,
        limits.max_head_bytes, limits.head_timeout_s)
    return config
