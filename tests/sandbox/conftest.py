"""Fixtures for the sandbox tests: a real Docker engine, a real server on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support import AppServer, free_port, unavailable

from agentrl.sandbox_server.wire.errors import DockerUnavailable

TOKEN = "test-token"


engine_missing = unavailable


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture(scope="session")
def backend() -> Iterator:
    from agentrl.sandbox_server.sandboxes.docker_backend import DockerBackend

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


@pytest.fixture(scope="session")
def server(backend) -> Iterator[AppServer]:
    from agentrl.sandbox_server.api.app import create_app

    with AppServer(create_app(backend, token=TOKEN, max_request_bytes=8 << 20), token=TOKEN) as srv:
        yield srv
