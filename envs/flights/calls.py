"""Tool calls as a Flights-v0 policy reads them: the last response, the tools listed (a call is
written by `agentrl.core.tool_call`)."""

from __future__ import annotations

import json
import re
from typing import Any

from agentrl.core.tools import TOOL_RESPONSE

# a tool of the first observation's list: a JSON schema (full mode) or a signature line (compact)
_TOOL_NAME = re.compile(r'\{"type": "function", "function": \{"name": "(\w+)"|^(\w+)\(.*\): ', re.MULTILINE)


def last_response(observation: str) -> tuple[str | None, Any, str | None]:
    """(tool name, content, error) of the last tool response in an observation."""
    found = TOOL_RESPONSE.findall(observation)
    if not found:
        return None, None, None
    try:
        payload = json.loads(found[-1])
    except json.JSONDecodeError:
        return None, None, "unreadable response"
    return payload.get("name"), payload.get("content"), payload.get("error")


def tool_names(observation: str) -> list[str]:
    """The tools a first observation lists, in order."""
    found = _TOOL_NAME.findall(observation.split("\n# Tools\n", 1)[-1])
    return [schema or line for schema, line in found]


def granularity_of(observation: str) -> str:
    """Which Flights-v0 granularity a first observation's tool list is ("coarse", "default", "fine")."""
    names = set(tool_names(observation))
    return "coarse" if "book_best" in names else "fine" if "confirm_hold" in names else "default"
