"""Running a server from Python: in the foreground, or in a background thread on a free loopback port.

`serve_in_thread` is what tests and the demo use to play over real HTTP without a second process.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from agentrl.server.config import ServerConfig
from agentrl.serving.children import free_port
from agentrl.serving.runner import ServerThread, uvicorn_config

__all__ = ["free_port", "run", "serve_in_thread"]


def _uvicorn_config(config: ServerConfig, log_level: str):  # type: ignore[no-untyped-def]  # uvicorn: lazy
    from agentrl.server.app import create_app

    return uvicorn_config(
        create_app(config), host=config.host, port=config.port, log_level=log_level,
        ws_per_message_deflate=False,  # env text is small and hot; compressing it costs more than it saves
        ws_max_size=config.max_body_bytes,  # a frame of steps may be as large as a batch request
        timeout_graceful_shutdown=10,
    )


def run(config: ServerConfig, log_level: str = "warning") -> None:
    """Serve in the foreground until SIGINT/SIGTERM, then close every episode."""
    import uvicorn

    config.check()
    uvicorn.Server(_uvicorn_config(config, log_level)).run()


@contextmanager
def serve_in_thread(config: ServerConfig | None = None, *, log_level: str = "warning",
                    startup_timeout_s: float = 20.0) -> Iterator[str]:
    """Start a server on a free loopback port in a daemon thread; yield its base URL; stop it on exit."""
    config = replace(config or ServerConfig(), host="127.0.0.1")
    if config.port in (0, 8000):
        config = replace(config, port=free_port())
    config.check()
    served = ServerThread(_uvicorn_config(config, log_level), "the agentrl server", startup_timeout_s)
    try:
        yield f"http://{config.host}:{config.port}"
    finally:
        served.stop()
