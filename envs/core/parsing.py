"""Turning a model's raw text into tool calls.

A model writes `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (Qwen/Hermes style),
possibly several per turn. Everything that can go wrong with that text becomes a `ParseFailure`
carrying a message meant for the model, never an exception: in RL a malformed action is an
ordinary event the policy must learn from.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from agentrl.core.encoding import has_surrogate, utf8_safe

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
# Junk a model can write that Python's JSON reader would accept, or choke on with an exception:
# integers past 64 bits (a 5000-digit one raises ValueError), NaN/Infinity, deep nesting.
MAX_INT_DIGITS = 19
INT_RANGE = (-(2**63), 2**63 - 1)
MAX_DEPTH = 32


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


class _Rejected(ValueError):
    """A JSON value no tool accepts; its message is meant for the model."""


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS or not INT_RANGE[0] <= int(text) <= INT_RANGE[1]:
        raise _Rejected(f"integer {text[:24]}{'...' if len(text) > 24 else ''} is out of the 64-bit range")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Rejected(f"number {text[:24]} is out of range")
    return value


def _parse_constant(name: str) -> float:
    raise _Rejected(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)


def _load(text: str) -> Any:
    """`json.loads` that turns every kind of junk into `_Rejected` or `json.JSONDecodeError`."""
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        raise _Rejected(f"JSON nests deeper than {MAX_DEPTH} levels") from None
    if _plain(text):
        return value
    problem = _junk(value)
    if problem:
        raise _Rejected(problem)
    return value


def _plain(text: str) -> bool:
    """Whether `text` cannot decode to junk, so that `_junk` need not walk its value (most calls): ASCII
    with no `\\u` escape holds no surrogate, and a value nests no deeper than its text has brackets."""
    return text.isascii() and "\\u" not in text and text.count("{") + text.count("[") <= MAX_DEPTH


def _junk(value: Any) -> str | None:
    """Why a decoded JSON value cannot be used (too deep, invalid Unicode), or None."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"JSON nests deeper than {MAX_DEPTH} levels"
        if isinstance(item, str) and has_surrogate(item):
            return "text holds a lone surrogate (invalid Unicode)"
        if isinstance(item, dict):
            stack.extend((key, depth + 1) for key in item)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return None


def decode_call(body: str) -> ParsedCall | ParseFailure:
    """One call's JSON (what a `<tool_call>` block holds, or an OpenAI tool call), read as
    `parse_tool_calls` reads each block."""
    raw = body.strip()
    if has_surrogate(raw):
        return ParseFailure(
            "tool call holds a lone surrogate (invalid Unicode); send UTF-8 text", utf8_safe(raw)
        )
    try:
        payload = _load(raw)
    except _Rejected as exc:
        return ParseFailure(f"tool call rejected: {exc}", raw)
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
            arguments = _load(arguments) if arguments.strip() else {}
        except _Rejected as exc:
            return ParseFailure(f"arguments of '{name}' rejected: {exc}", raw)
        except json.JSONDecodeError as exc:
            return ParseFailure(f"arguments of '{name}' are not valid JSON ({exc.msg})", raw)
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return ParseFailure(f"arguments of '{name}' must be a JSON object", raw)
    return ParsedCall(name=name, arguments=arguments)


def tool_call(name: str, **arguments: Any) -> str:
    """One call as a model writes it, the text `parse_tool_calls` reads back as `ParsedCall(name,
    arguments)`: for scripted policies, oracles and tests, so that each writes calls one way."""
    return CALL_OPEN + json.dumps({"name": name, "arguments": arguments}) + CALL_CLOSE


def parse_tool_calls(text: str, max_calls: int = 16) -> list[ParsedCall | ParseFailure]:
    """All calls in `text`, in order; an unclosed or surplus call becomes a `ParseFailure`."""
    items: list[ParsedCall | ParseFailure] = []
    # each call runs from an opening tag to the first closing tag after it, as the pattern
    # `<tool_call>(.*?)</tool_call>` matches them; `str.find` costs a third of the regex
    start = text.find(CALL_OPEN)
    while start >= 0:
        close = text.find(CALL_CLOSE, start + len(CALL_OPEN))
        if close < 0:
            items.append(ParseFailure(f"a {CALL_OPEN} was opened but never closed with {CALL_CLOSE}"))
            break
        items.append(decode_call(text[start + len(CALL_OPEN):close]))
        start = text.find(CALL_OPEN, close + len(CALL_CLOSE))
    if len(items) > max_calls:
        surplus = ParseFailure(f"too many tool calls in one turn; only the first {max_calls} ran")
        items = [*items[:max_calls], surplus]
    return items
