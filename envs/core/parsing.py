"""Turning a model's raw text into tool calls.

A model writes `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (Qwen/Hermes style),
possibly several per turn. Everything that can go wrong with that text becomes a `ParseFailure`
carrying a message meant for the model, never an exception: in RL a malformed action is an
ordinary event the policy must learn from.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


@dataclass(frozen=True)
class ParsedCall:
    """A syntactically valid call; its arguments are not yet checked against the tool's schema."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ParseFailure:
    """A call that could not be read, with the reason phrased for the model."""

    message: str
    raw: str = ""


def _decode_call(body: str) -> ParsedCall | ParseFailure:
    raw = body.strip()
    try:
        payload = json.loads(raw)
    except json.JSONDecodeError as exc:
        return ParseFailure(f"tool call is not valid JSON ({exc.msg} at position {exc.pos})", raw)
    if not isinstance(payload, dict):
        return ParseFailure("tool call must be a JSON object with 'name' and 'arguments'", raw)
    if isinstance(payload.get("function"), dict):  # OpenAI's {"type": "function", "function": {...}}
        payload = payload["function"]
    name = payload.get("name")
    if not isinstance(name, str) or not name:
        return ParseFailure("tool call has no 'name' string", raw)
    arguments: Any = payload.get("arguments", payload.get("args", {}))
    if isinstance(arguments, str):  # OpenAI sends arguments as a JSON-encoded string
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return ParseFailure(f"arguments of '{name}' are not valid JSON ({exc.msg})", raw)
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return ParseFailure(f"arguments of '{name}' must be a JSON object", raw)
    return ParsedCall(name=name, arguments=arguments)


def parse_tool_calls(text: str, max_calls: int = 16) -> list[ParsedCall | ParseFailure]:
    """All calls in `text`, in order; an unclosed or surplus call becomes a `ParseFailure`."""
    items: list[ParsedCall | ParseFailure] = []
    end = 0
    for match in _CALL_RE.finditer(text):
        items.append(_decode_call(match.group(1)))
        end = match.end()
    tail = text[end:]
    if CALL_OPEN in tail:
        items.append(ParseFailure(f"a {CALL_OPEN} was opened but never closed with {CALL_CLOSE}"))
    if len(items) > max_calls:
        surplus = ParseFailure(f"too many tool calls in one turn; only the first {max_calls} ran")
        items = [*items[:max_calls], surplus]
    return items
