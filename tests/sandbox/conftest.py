"""Fixtures for the sandbox tests: a real Docker engine, a real server on loopback."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from support import free_port, unavailable

from agentrl.sandbox_server.errors import DockerUnavailable

TOKEN = "test-token"


engine_missing = unavailable


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture(scope="session")
def backend() -> Iterator:
    from agentrl.sandbox_server.docker_backend import DockerBackend

    try:
        b = DockerBackend(pool_size=2, reap_interval_s=0.5)
    except DockerUnavailable as exc:
        engine_missing(str(exc).splitlines()[0])
    yield b
    b.close()


@pytest.fixture
def sandbox(backend) -> Iterator:
    sb = backend.create()
    yield sb
    sb.close()


class ServerThread:
    """uvicorn serving an app on 127.0.0.1 in a thread of the test process."""

    def __init__(self, app, token: str | None = None) -> None:
        import uvicorn

        self.app = app
        self.token = token
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="session")
def server(backend) -> Iterator[ServerThread]:
    from agentrl.sandbox_server.app import create_app

    with ServerThread(create_app(backend, token=TOKEN, max_request_bytes=8 << 20), token=TOKEN) as srv:
        yield srv
