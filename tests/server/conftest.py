"""Fixtures of the server tests: real uvicorn servers on free loopback ports, in a thread."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """One shared server per test module, with default settings."""
    with serve_in_thread(ServerConfig(max_episodes=2048)) as url:
        yield url
