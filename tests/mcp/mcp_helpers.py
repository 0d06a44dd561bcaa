"""What the MCP-v0 tests share: the notebook test server's command line, small tasks over it, and a
verifier for the task file's `verifier` check."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

from agentrl.core import tool_call as call
from agentrl.mcp import FinalState

NOTEBOOK = Path(__file__).parent / "servers" / "notebook.py"


def notebook(*extra: str, tag: str | None = None) -> list[str]:
    """The notebook server's command line, its state in the episode's workspace; `tag` marks its
    process so that a test can find it."""
    return [sys.executable, str(NOTEBOOK), "--dir", "{workspace}", "--tag", tag or uuid.uuid4().hex, *extra]


def task(task_id: str, split: str = "train", **fields: Any) -> dict[str, Any]:
    """A task whose answer is the note under "a" (seeded as "1") and whose state check wants key b."""
    base: dict[str, Any] = {
        "id": task_id,
        "family": "notes",
        "split": split,
        "prompt": f"[{task_id}] Store b=2 in the notebook, then answer the value of note a.",
        "setup": {
            "files": {"notebook.json": json.dumps({"a": "1"})},
            "tool_calls": [{"name": "put", "arguments": {"key": "seeded", "value": task_id}}],
        },
        "checks": {"answer": "1", "state": [{"name": "keys", "arguments": {}, "contains": ["b"]}]},
        "oracle": [
            {"name": "put", "arguments": {"key": "b", "value": "2"}},
            {"name": "get", "arguments": {"key": "a"}},
        ],
    }
    base.update(fields)
    return base


TASKS = [task("notes-0"), task("notes-1"), task("notes-2", split="test")]


def oracle_actions(raw: dict[str, Any], answer: str = "1") -> list[str]:
    return [call(c["name"], **c["arguments"]) for c in raw["oracle"]] + [call("finish", answer=answer)]


def b_is_two(final: FinalState) -> float:
    """A verifier: the note b reads "2" on the live server, and the agent put it there itself."""
    wrote = any(c["name"] == "put" and c["ok"] and c["arguments"].get("key") == "b" for c in final.calls)
    return float(wrote and final.call_tool("get", {"key": "b"}) == "2")


def not_a_score(final: FinalState) -> str:
    return "yes"
