"""The env's tool calls through a chat API's native tool calling (OpenAI `tools` / `tool_calls`).

An env's actions stay text: a policy that writes `<tool_call>` blocks needs none of this. A policy
behind an OpenAI-compatible chat server is offered the env's tools typed, as `tools` (the specs the
reset's `info["tools"]` lists, `Tool.spec`'s shape: nothing here writes another), and answers with
`tool_calls`. Three conversions connect the two, each written once:

- `task_text`: the first observation without the tool listing, since the server lists the tools;
- `tool_calls_action`: a reply's `tool_calls` as the env's text action, one `<tool_call>` each;
- `tool_messages`: the observation that answers them as `role: tool` messages, one per call id.

A wrong call (an unknown tool, arguments that are not JSON) is read by the env as any wrong text
call is: it becomes an error result the model sees in the call's tool message, never an exception.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agentrl.core.base import CALL_HINT, TOOLS_HEADER
from agentrl.core.encoding import has_surrogate
from agentrl.core.parsing import CALL_CLOSE, CALL_OPEN, ParsedCall, decode_call

RESPONSE_OPEN, RESPONSE_CLOSE = "<tool_response>", "</tool_response>"  # `tools.tool_response`'s lines
# the tool message of a call whose result the env did not give apart (see `tool_messages`)
SEE_FIRST = "no separate result for this call: the result of call {first} holds the whole observation"


def task_text(observation: str) -> str:
    """The first observation without `ToolEnv`'s tool listing (what follows it, such as a customer's
    opening message, is kept), for chat APIs that list the tools themselves; an observation without
    the listing comes back whole."""
    head, found, rest = observation.partition(TOOLS_HEADER)
    if not found:
        return observation
    _, hinted, tail = rest.partition(CALL_HINT)
    return head + tail if hinted else head


def tool_calls_action(tool_calls: Sequence[Any]) -> str:
    """A reply's `tool_calls` (the chat API's wire form) as the env's action: one `<tool_call>` block
    per call, in order, so that the env answers each with one `<tool_response>`. A reply's text
    besides its calls is not part of the action (a tool env reads only the calls of a reply that
    has some).

    Arguments the env's reader accepts are written as the JSON object they encode, as a model
    writing text calls writes them; anything else (no name, arguments that are not JSON) is passed
    on as it came, for the env to answer with an error result, as it answers such text calls. `<` is
    written as its JSON escape, so that no name or argument can close a block early."""
    blocks = []
    for call in tool_calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        function = function if isinstance(function, Mapping) else {}
        body = _json({"name": function.get("name"), "arguments": function.get("arguments")})
        read = decode_call(body)
        if isinstance(read, ParsedCall):
            body = _json({"name": read.name, "arguments": read.arguments})
        blocks.append(CALL_OPEN + body.replace("<", "\\u003c") + CALL_CLOSE)
    return "\n".join(blocks)


def _json(value: Any) -> str:
    """`value` as JSON text, non-ASCII kept as it is unless it holds a lone surrogate (which no
    UTF-8 transport carries; escaped, the env's reader still rejects it)."""
    text = json.dumps(value, ensure_ascii=False)
    return json.dumps(value) if has_surrogate(text) else text


def response_bodies(observation: str) -> list[str] | None:
    """The JSON bodies of an observation made of `<tool_response>` blocks only (what `ToolEnv` answers
    tool calls with: one three-line block per call, the body on one line), in order; None for any
    other observation (a message about the whole action, a clipped observation)."""
    lines = observation.split("\n")
    if len(lines) % 3:
        return None
    bodies = []
    for at in range(0, len(lines), 3):
        opened, body, closed = lines[at:at + 3]
        if opened != RESPONSE_OPEN or closed != RESPONSE_CLOSE:
            return None
        bodies.append(body)
    return bodies


def tool_messages(tool_calls: Sequence[Any], observation: str) -> list[dict[str, Any]]:
    """The observation that answers `tool_calls` as one `role: tool` message per call, with its
    `tool_call_id` (a chat API wants every call answered before the conversation goes on).

    The env answers the i-th call with its i-th `<tool_response>`, whose body is the i-th message; a
    call past the env's per-turn limit gets the env's last response (it says why it did not run).
    An observation that is not responses alone goes whole to the first call, and each other call's
    message points there."""
    ids = [_call_id(call, n) for n, call in enumerate(tool_calls)]
    if not ids:
        return []
    bodies = response_bodies(observation)
    if bodies:
        contents = [bodies[min(n, len(bodies) - 1)] for n in range(len(ids))]
    else:
        contents = [observation, *(SEE_FIRST.format(first=ids[0]) for _ in ids[1:])]
    return [{"role": "tool", "tool_call_id": i, "content": c} for i, c in zip(ids, contents, strict=True)]


def _call_id(call: Any, n: int) -> str:
    """A call's id; a server that gave none gets one from the call's place, so each message has one."""
    found = call.get("id") if isinstance(call, Mapping) else None
    return found if isinstance(found, str) and found else f"call_{n}"
