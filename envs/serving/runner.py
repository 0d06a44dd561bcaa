"""How every agentrl HTTP server runs under uvicorn: one config, so that each keeps the same promise
about idle connections to its clients, and the two ways a server runs: in the foreground
(`run_server`) or in a thread of a process that does something else (`ServerThread`).

The promise: a server keeps an idle keep-alive connection open longer than any client keeps it in
its pool, so it is always the client that closes one. With equal timers (uvicorn's default and
httpx's are both 5 s) a server can close a connection in the very moment a client sends a request
on it; the request is then lost in flight (`httpx.ReadError`, a reset), and a call that is not
idempotent, an exec or a step, cannot be sent again blindly. Under load the window is wide enough to
hit: 32 sandboxes with 100 execs each lost one call that way on a busy 2-core machine.

The config also bounds what a caller can make a server do before it is authenticated: the size and
time of a request's head, the stalls of a body, the connections held, and the open-files limit
(`agentrl.serving.http_limits`, set by the `AGENTRL_HTTP_*` environment variables).
"""

from __future__ import annotations

import ipaddress
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import uvicorn

    from agentrl.serving.http_limits import HttpLimits

__all__ = ["KEEP_ALIVE_S", "ServerThread", "is_loopback", "run_server", "uvicorn_config"]

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
    from agentrl.serving.http_limits import MAX_CONNECTIONS_CAP, HttpLimits, LimitedConfig, open_files_limit

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


def run_server(app: Any, *, host: str, port: int, log_level: str = "warning", **options: Any) -> None:
    """Serve `app` in the foreground until SIGINT/SIGTERM under `uvicorn_config` (`options` are
    uvicorn's): a lone server, or the address of a cluster, whose app's lifespan starts its holders
    and stops them (`holders.lifespan`)."""
    import uvicorn

    uvicorn.Server(uvicorn_config(app, host=host, port=port, log_level=log_level, **options)).run()


class ServerThread:
    """A uvicorn server in a daemon thread of this process, serving once the constructor returns:
    what a test, the demo and a Ray actor run a server in. `what` names the server in the error
    raised when it does not start within `startup_timeout_s` (its thread ended, or the time is past)."""

    def __init__(self, config: uvicorn.Config, what: str, startup_timeout_s: float) -> None:
        import uvicorn

        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name=what, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + startup_timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start")
            time.sleep(0.01)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop serving: the app's shutdown runs (an episode server closes its episodes), then the
        thread ends."""
        self.server.should_exit = True
        self.thread.join(timeout=timeout_s)


def is_loopback(host: str) -> bool:
    """Whether `host` is reachable from this machine only (a server elsewhere needs a token)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
