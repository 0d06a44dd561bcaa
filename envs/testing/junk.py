"""Junk actions: what a policy can write that no env may raise on.

Each is named, and marked when it is malformed beyond doubt (not text, over the length limit, a
tool call that cannot be read or run): the env's observation must then say what was wrong and pay
nothing. Random text is only required to be answered, since an env may read any text as a message
(TauAirline-v0 passes it to its customer). The list is fixed (seeded), so a failure reproduces.
"""

from __future__ import annotations

import json
import random
from typing import Any

# the tool name used when an env lists no tools (a text env such as Search-v0)
FALLBACK_TOOL = "finish"


def first_tool(env: Any) -> str:
    """A tool the env really has, so that junk arguments reach its argument checks."""
    specs = env.trajectory().get("tools") or []
    names = [spec.get("function", {}).get("name") for spec in specs if isinstance(spec, dict)]
    return next((name for name in names if isinstance(name, str)), FALLBACK_TOOL)


def junk_actions(env: Any) -> list[tuple[str, Any, bool]]:
    """(name, action, malformed) for an env just reset."""
    rng = random.Random(0)
    raw = bytes(rng.getrandbits(8) for _ in range(512))
    limit = int(env.action_space.max_length)
    tool = json.dumps(first_tool(env))

    def tool_call(body: str) -> str:
        return f"<tool_call>{body}</tool_call>"

    def arguments(text: str) -> str:
        return tool_call(f'{{"name": {tool}, "arguments": {text}}}')

    wrong_types = json.dumps({"zz_unknown": {"deep": [None, 1e308]}, "path": 7, "text": [], "n": "seven"})
    return [
        ("random bytes", raw, True),
        ("None", None, True),
        ("a number", 42, True),
        ("a string over the length limit", "x" * (limit + 1), True),
        ("random bytes read as text", raw.decode("utf-8", "surrogateescape"), False),
        ("control characters and lone surrogates", "\x00\x1b[2J\ud800 \udfff\x7f", False),
        ("an empty string", "", True),
        ("a tool call that is not JSON", tool_call("{name: " + tool), True),
        ("a tool call nested past any depth", tool_call("[" * min(limit - 40, 50_000)), True),
        ("an unknown tool", tool_call(json.dumps({"name": "no_such_tool", "arguments": {}})), True),
        ("a tool call without a name", tool_call(json.dumps({"arguments": {"x": 1}})), True),
        ("arguments that are a list", arguments("[1, 2]"), True),
        ("arguments of the wrong types", arguments(wrong_types), True),
        ("a huge integer argument", arguments('{"n": ' + "9" * 5000 + "}"), True),
        ("NaN in the arguments", arguments('{"n": NaN}'), True),
        ("an unclosed tool call", "<tool_call>" + json.dumps({"name": first_tool(env)}), True),
    ]
