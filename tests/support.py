"""What tests of every area share: the skip-or-fail rule for missing engines, and loopback ports."""

from __future__ import annotations

import os
import socket
from typing import NoReturn

import pytest


def unavailable(reason: str) -> NoReturn:
    """Skip a test whose engine (Docker, Java, a model package) is missing, but fail under CI.

    Locally a missing engine is a machine without it; in CI (`CI=true`) it is a broken setup, and a
    skip there would hide it.
    """
    if os.environ.get("CI") == "true":
        pytest.fail(f"required under CI=true but unavailable: {reason}")
    pytest.skip(reason)


def free_port() -> int:
    """A free TCP port on 127.0.0.1: tests only ever listen on and talk to loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
