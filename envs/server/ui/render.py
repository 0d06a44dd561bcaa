"""Env text and tool schemas as HTML for the page at `/ui`: readable observations, generated forms.

Observations are Markdown with tool calls and tool results in Hermes tags; each kind gets its own
look (Markdown through markdown-it with raw HTML off, so env text can never inject markup; tool
JSON pretty-printed). Forms are built from the OpenAI function schemas an env lists in
`info["tools"]`; the page turns a filled form into the same `<tool_call>` text a model writes, so
the env, not the page, judges the arguments.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup, escape

_MD = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])
_BLOCK = re.compile(r"<(tool_call|tool_response)>\s*(.*?)\s*</\1>", re.DOTALL)
SCALARS = {"string", "integer", "number", "boolean"}


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _json_object(line: str) -> dict[str, Any] | None:
    if not (line.startswith("{") and line.endswith("}")):
        return None
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _markdown(text: str) -> str:
    """Markdown, except that a line holding one JSON object (a tool list) folds into a block."""
    out: list[str] = []
    run: list[str] = []
    for line in text.split("\n"):
        value = _json_object(line.strip())
        if value is None:
            run.append(line)
            continue
        out.append(_MD.render("\n".join(run)))
        run = []
        fn = value.get("function")
        fn = fn if isinstance(fn, dict) else value
        name = fn.get("name")
        title = name if isinstance(name, str) else line[:60]
        out.append(f'<details class="json"><summary>{escape(title)}</summary><pre>{escape(_pretty(value))}'
                   "</pre></details>")
    out.append(_MD.render("\n".join(run)))
    return "".join(out)


def _tool_block(kind: str, body: str) -> str | None:
    """A call or a result as a box, or None when it is not one (prose that names the tags)."""
    try:
        payload = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return None
    name = escape(payload["name"])
    if kind == "tool_call":
        args = payload.get("arguments", {})
        return f'<div class="tool_call"><b>{name}</b><pre>{escape(_pretty(args))}</pre></div>'
    if "error" in payload:
        error = escape(str(payload["error"]))
        return f'<div class="tool_response error"><b>{name}</b> error<pre>{error}</pre></div>'
    return f'<div class="tool_response"><b>{name}</b>{_value_html(payload.get("content"))}</div>'


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _cell(value: Any, depth: int, row: bool = False) -> str:
    """A table cell: text, a nested table (a record's records, a big record), else compact JSON.

    Cells of a records table stay one line each, so that a search result reads as a table."""
    if isinstance(value, str):
        return str(escape(value))
    nested = _is_records(value) or (not row and isinstance(value, dict) and len(_compact(value)) > 80)
    if depth < 2 and nested:
        return _value_html(value, depth + 1)
    return f"<code>{escape(_compact(value))}</code>"


def _is_records(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _value_html(value: Any, depth: int = 0) -> str:
    """A tool's result as tables where it has their shape (records, a record), else as JSON text."""
    if _is_records(value):
        columns = list(dict.fromkeys(key for row in value for key in row))
        head = "".join(f"<th>{escape(c)}</th>" for c in columns)
        rows = "".join(
            "<tr>" + "".join(f"<td>{_cell(r.get(c, ''), depth, row=True)}</td>" for c in columns) + "</tr>"
            for r in value)
        return f'<table class="records"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
    if isinstance(value, dict) and value:
        rows = "".join(f"<tr><th>{escape(k)}</th><td>{_cell(v, depth)}</td></tr>" for k, v in value.items())
        return f'<table class="record"><tbody>{rows}</tbody></table>'
    return f"<pre>{escape(_pretty(value))}</pre>"


def text_html(text: str) -> Markup:
    """An observation or an action: Markdown around tool calls and tool results."""
    parts: list[str] = []
    pos = 0
    for match in _BLOCK.finditer(text):
        block = _tool_block(match.group(1), match.group(2))
        if block is None:
            continue
        parts.append(_markdown(text[pos:match.start()]))
        parts.append(block)
        pos = match.end()
    parts.append(_markdown(text[pos:]))
    return Markup("".join(parts))


@dataclass
class FormField:
    """One argument of a tool, as an input the page can show and read back.

    `kind` says how the page reads the input: a scalar type, `enum` (a select), `list` (comma
    separated items of `item`) or `json` (anything else, typed as JSON).
    """

    name: str
    kind: str
    required: bool
    description: str = ""
    choices: list[Any] = field(default_factory=list)
    item: str = "string"
    default: str = ""
    long: bool = False


@dataclass
class ToolForm:
    name: str
    description: str
    fields: list[FormField]


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    """An optional argument (`anyOf: [X, null]`) as X, keeping the outer description and default."""
    options = [o for o in schema.get("anyOf", ()) if isinstance(o, dict) and o.get("type") != "null"]
    if len(options) == 1:
        inner = {k: v for k, v in schema.items() if k != "anyOf"}
        return {**options[0], **inner}
    return schema


def _field(name: str, schema: dict[str, Any], required: bool) -> FormField:
    s = _resolve(schema)
    kind = s.get("type")
    kind = kind if isinstance(kind, str) else "json"
    found = FormField(name, kind, required, str(s.get("description", "")))
    if "default" in s and s["default"] is not None:
        found.default = json.dumps(s["default"]) if not isinstance(s["default"], str) else s["default"]
    if isinstance(s.get("enum"), list) or "const" in s:
        found.kind, found.choices = "enum", list(s.get("enum") or [s["const"]])
    elif kind == "array":
        item = s.get("items", {})
        item_type = item.get("type") if isinstance(item, dict) else None
        found.kind, found.item = ("list", item_type) if item_type in SCALARS else ("json", "string")
    elif kind not in SCALARS:
        found.kind = "json"
    found.long = found.kind == "json" or (found.kind == "string" and "pattern" not in s
                                          and int(s.get("maxLength", 10**6)) > 100)
    return found


def tool_forms(tools: Any) -> list[ToolForm]:
    """Forms for the OpenAI function-tool specs in `tools`; entries of another shape are skipped."""
    forms = []
    for spec in tools if isinstance(tools, list) else []:
        fn = spec.get("function") if isinstance(spec, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            continue
        params = fn.get("parameters")
        params = params if isinstance(params, dict) else {}
        props = params.get("properties")
        props = props if isinstance(props, dict) else {}
        required = set(params.get("required") or ())
        fields = [_field(name, s if isinstance(s, dict) else {}, name in required)
                  for name, s in props.items()]
        forms.append(ToolForm(fn["name"], str(fn.get("description", "")), fields))
    return forms
