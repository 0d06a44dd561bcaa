"""Shared helpers of the airline tests (a uniquely named module: pytest puts test folders on sys.path)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from support import step_actions

from agentrl.core import tool_call as call

DATA = Path(__file__).parent / "data"
DATA_TAU2 = Path(__file__).parent / "data_tau2"  # the same invented domain in τ²-bench's layout
TOOL_RESPONSE = re.compile(r"<tool_response>\s*(.*?)\s*</tool_response>", re.DOTALL)


def responses(observation: str) -> list[dict[str, Any]]:
    """The tool responses of an observation, as dicts ({"name", "content"} or {"name", "error"})."""
    return [json.loads(body) for body in TOOL_RESPONSE.findall(observation)]


def run_tool(env: Any, name: str, **arguments: Any) -> dict[str, Any]:
    """Call one tool in a running episode; its response."""
    observation, *_ = env.step(call(name, **arguments))
    (response,) = responses(observation)
    return response


def play_actions(env: Any, actions: list[str]) -> tuple[float, dict[str, Any]]:
    """Step a reset episode with `actions` until it ends, then close it: its last reward and info."""
    try:
        return step_actions(env, actions)
    finally:
        env.close()
