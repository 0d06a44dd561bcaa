"""How every agentrl HTTP server runs under uvicorn: one config, so that each keeps the same promise
about idle connections to its clients.

The promise: a server keeps an idle keep-alive connection open longer than any client keeps it in
its pool, so it is always the client that closes one. With equal timers (uvicorn's default and
httpx's are both 5 s) a server can close a connection in the very moment a client sends a request
on it; the request is then lost in flight (`httpx.ReadError`, a reset), and a call that is not
idempotent, an exec or a step, cannot be sent again blindly. Under load the window is wide enough to
hit: 32 sandboxes with 100 execs each lost one call that way on a busy 2-core machine.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KEEP_ALIVE_S", "uvicorn_config"]

KEEP_ALIVE_S = 65
"""How long a server keeps an idle connection: past httpx's pool expiry (5 s), aiohttp's (15 s) and
the 60 s of common load balancers in front of a server. An idle connection costs a socket and a few
KiB; a request that dies in a race costs a step or an exec."""


def uvicorn_config(app: Any, *, host: str, port: int, log_level: str = "warning", access_log: bool = False,
                   **options: Any) -> Any:
    """A `uvicorn.Config` for `app` with the servers' keep-alive; `options` are uvicorn's own
    (WebSocket limits, graceful shutdown). uvicorn loads here, not when this module is imported."""
    import uvicorn

    return uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=access_log,
                          timeout_keep_alive=KEEP_ALIVE_S, **options)
