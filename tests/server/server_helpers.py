"""Shared helpers of the server tests (a uniquely named module: pytest puts test folders on sys.path)."""

from __future__ import annotations

from agentrl.core import tool_call as call  # noqa: F401  (the one way to write a call, for the tests that import it here)

ECHO = "agentrl/Echo-v0"
FLIGHTS = "agentrl/Flights-v0"


