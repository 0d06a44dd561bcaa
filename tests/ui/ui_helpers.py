"""Shared constants of the page's tests (a uniquely named module: pytest puts test folders on sys.path)."""

from __future__ import annotations

import os
from typing import Any

from agentrl.server.config import ServerConfig

CHROMIUM = os.environ.get("AGENTRL_CHROMIUM", "/usr/bin/chromium")
# a quiet browser: no network of its own, no first-run pages, nothing kept between runs
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ECHO = "agentrl/Echo-v0"
FLIGHTS = "agentrl/Flights-v0"
TOKEN = "page-test-token"


def served(**extra: Any) -> ServerConfig:
    # the oracle reads the task from privileged info, which only the operator can turn on
    return ServerConfig(env_ids=(ECHO, FLIGHTS), env_kwargs={FLIGHTS: {"privileged_info": True}}, **extra)
