"""A `tools/call` result as the text the model reads. Standard library only: the in-container bridge
(`agentrl.mcp.bridge`) carries this module's source and renders there, so that a 10 MB answer is
clipped before it leaves the sandbox, by the same code that renders results in process isolation."""

from __future__ import annotations

import json
from typing import Any


def clip_result(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, saying how long it was."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[the result was {len(text):,} characters; clipped to {limit:,}]"


def render_result(result: dict[str, Any], limit: int) -> str:
    """The result's text blocks, in order; the structured content as JSON when there is no text (a
    server that gives both gives the text as its rendering of the structure, as the specification
    asks); other blocks by what they are. Clipped to `limit`, saying so."""
    parts: list[str] = []
    for block in result.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "resource":
            resource = block.get("resource") or {}
            text = resource.get("text")
            parts.append(text if isinstance(text, str) else f"[resource {resource.get('uri')}: binary]")
        elif kind == "resource_link":
            parts.append(f"[resource link {block.get('uri')}]")
        else:  # image, audio: said as what they are, not as base64
            size = len(block.get("data") or "") * 3 // 4
            parts.append(f"[{kind} {block.get('mimeType', '')}, {size} bytes]")
    text = "\n".join(parts)
    if not text and result.get("structuredContent") is not None:
        text = json.dumps(result["structuredContent"], ensure_ascii=False, sort_keys=True)
    return clip_result(text, limit)


def junk_line(message: Any) -> str:
    """What a stdio server wrote that is not JSON-RPC, from the error the SDK gives for it (pydantic's,
    whose first error holds the line), at most 200 characters."""
    errors = getattr(message, "errors", None)
    found = errors() if callable(errors) else None
    line = found[0].get("input") if isinstance(found, list) and found and isinstance(found[0], dict) else None
    return str(line if isinstance(line, str) else message)[:200]
