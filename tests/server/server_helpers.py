"""Shared helpers of the server tests (a uniquely named module: pytest puts test folders on sys.path)."""

from __future__ import annotations

import json

ECHO = "agentrl/Echo-v0"
FLIGHTS = "agentrl/Flights-v0"


def call(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"
