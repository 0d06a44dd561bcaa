"""MCP-v0's tasks: read from a JSONL file (one task per line) or given as dicts, and judged after the
episode, outside the agent's reach.

A task names its prompt, how its workspace is set up (files, a bash script, tool calls through the
server once it runs) and its checks; every check given must pass for reward 1:

- `answer`: the `finish` answer equals it after normalising both (strip, casefold, collapse spaces);
- `state`: MCP tool calls on the episode's server after the end, each of whose text results must
  contain every string of `contains` and none of `excludes` (an error result fails);
- `verifier`: "module:function", called with a `FinalState`, returning a float in [0, 1] or a bool
  (anything below 1 fails).

A task without a check is refused: it would pay any episode. "{workspace}" in the prompt, the setup
and the checks' arguments is replaced by the episode's workspace path (`substitute`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path, PurePosixPath
from typing import Any

SPLITS = ("train", "test")
WORKSPACE = "{workspace}"
TASK_KEYS = frozenset({"id", "family", "split", "prompt", "setup", "checks", "oracle"})
SETUP_KEYS = frozenset({"files", "script", "tool_calls"})
CHECK_KEYS = frozenset({"answer", "state", "verifier"})
STATE_KEYS = frozenset({"name", "arguments", "contains", "excludes"})


class TaskError(ValueError):
    """A task file or task dict that does not say what MCP-v0 needs; the message names the task."""


@dataclass(frozen=True)
class Task:
    """One task, as its line in the task file gives it (`raw`), read and checked."""

    id: str
    family: str
    split: str
    prompt: str
    files: dict[str, str] = field(default_factory=dict)
    script: str | None = None
    setup_calls: tuple[dict[str, Any], ...] = ()
    answer: str | None = None
    state: tuple[dict[str, Any], ...] = ()
    verifier: str | None = None
    oracle: tuple[dict[str, Any], ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass
class FinalState:
    """What a verifier sees once the episode is over: the task (its dict), the `finish` answer (None
    when the agent never finished), the episode's calls (each step's `calls` of the trajectory
    record: name, arguments, ok, result) and `call_tool(name, arguments) -> str`, the text result
    of a call on the episode's live server."""

    task: dict[str, Any]
    answer: str | None
    calls: list[dict[str, Any]]
    call_tool: Callable[[str, dict[str, Any]], str]


@dataclass(frozen=True)
class Verdict:
    """Each check's outcome (name -> passed), and what the verifier scored; `solved` when all passed."""

    checks: dict[str, bool]
    verifier_score: float | None = None

    @property
    def solved(self) -> bool:
        return bool(self.checks) and all(self.checks.values())


def normalise(text: str) -> str:
    return " ".join(text.split()).casefold()


def substitute(value: Any, workspace: str) -> Any:
    """`value` with "{workspace}" replaced in every string it holds (keys kept)."""
    if isinstance(value, str):
        return value.replace(WORKSPACE, workspace)
    if isinstance(value, list):
        return [substitute(v, workspace) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, workspace) for k, v in value.items()}
    return value


def load_tasks(source: str | Path | Sequence[dict[str, Any]]) -> list[Task]:
    """Every task of a JSONL file (a path) or of a list of dicts, checked; ids must be unique."""
    if isinstance(source, (str, Path)):
        lines = Path(source).read_text().splitlines()
        raw = []
        for number, line in enumerate(lines, 1):
            if line.strip():
                try:
                    raw.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise TaskError(f"{source}, line {number}: not JSON: {exc}") from None
    else:
        raw = list(source)
    tasks = [read_task(item) for item in raw]
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise TaskError(f"task id {task.id!r} appears twice")
        seen.add(task.id)
    if not tasks:
        raise TaskError("no tasks given")
    return tasks


def _expect(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise TaskError(f"task {where}: {message}")


def _calls(value: Any, where: str, what: str) -> tuple[dict[str, Any], ...]:
    _expect(isinstance(value, list), where, f"{what} must be a list of calls")
    for call in value:
        _expect(
            isinstance(call, dict)
            and isinstance(call.get("name"), str)
            and isinstance(call.get("arguments", {}), dict),
            where,
            f"each of {what} must be {{'name': str, 'arguments': {{...}}}}, not {str(call)[:80]}",
        )
    return tuple({"name": c["name"], "arguments": dict(c.get("arguments", {})), **c} for c in value)


def read_task(item: Any) -> Task:
    """One task dict, checked: every key known, every check well-formed, at least one check."""
    _expect(isinstance(item, dict), "?", f"a task is a JSON object, not {type(item).__name__}")
    where = repr(item.get("id"))
    _expect(isinstance(item.get("id"), str) and bool(item["id"]), where, "needs an 'id' (a string)")
    _expect(not (unknown := set(item) - TASK_KEYS), where, f"unknown keys {sorted(unknown)}")
    _expect(item.get("split") in SPLITS, where, f"'split' must be one of {SPLITS}")
    _expect(isinstance(item.get("prompt"), str) and bool(item["prompt"]), where, "needs a 'prompt'")
    setup = item.get("setup") or {}
    _expect(
        isinstance(setup, dict) and not set(setup) - SETUP_KEYS,
        where,
        f"'setup' takes only {sorted(SETUP_KEYS)}",
    )
    files = setup.get("files") or {}
    _expect(
        isinstance(files, dict) and all(isinstance(v, str) for v in files.values()),
        where,
        "'setup.files' maps relative paths to text",
    )
    for path in files:
        parts = PurePosixPath(path).parts
        _expect(
            bool(parts) and not PurePosixPath(path).is_absolute() and ".." not in parts,
            where,
            f"setup file {path!r} must be a relative path inside the workspace",
        )
    script = setup.get("script")
    _expect(script is None or isinstance(script, str), where, "'setup.script' is a bash script (a string)")
    checks = item.get("checks") or {}
    _expect(
        isinstance(checks, dict) and not set(checks) - CHECK_KEYS,
        where,
        f"'checks' takes only {sorted(CHECK_KEYS)}",
    )
    _expect(
        any(checks.get(k) not in (None, [], "") for k in CHECK_KEYS),
        where,
        "has no check: it would pay any episode",
    )
    answer = checks.get("answer")
    _expect(answer is None or isinstance(answer, str), where, "'checks.answer' is a string")
    state = _calls(checks.get("state", []), where, "'checks.state'")
    for check in state:
        _expect(not set(check) - STATE_KEYS, where, f"a state check takes only {sorted(STATE_KEYS)}")
        for key in ("contains", "excludes"):
            _expect(
                isinstance(check.get(key, []), list) and all(isinstance(s, str) for s in check.get(key, [])),
                where,
                f"a state check's {key!r} is a list of strings",
            )
        _expect(
            bool(check.get("contains") or check.get("excludes")),
            where,
            "a state check needs 'contains' or 'excludes'",
        )
    verifier = checks.get("verifier")
    _expect(
        verifier is None or (isinstance(verifier, str) and ":" in verifier),
        where,
        "'checks.verifier' is 'module:function'",
    )
    return Task(
        id=item["id"],
        family=str(item.get("family", "")),
        split=item["split"],
        prompt=item["prompt"],
        files=dict(files),
        script=script,
        setup_calls=_calls(setup.get("tool_calls", []), where, "'setup.tool_calls'"),
        answer=answer,
        state=state,
        verifier=verifier,
        oracle=_calls(item.get("oracle", []), where, "'oracle'"),
        raw=item,
    )


def state_text(
    task: Task, workspace: str, call_tool: Callable[[str, dict[str, Any]], str | None]
) -> list[str | None]:
    """The text result of each of the task's state-check calls (None where the call failed)."""
    return [call_tool(check["name"], substitute(check["arguments"], workspace)) for check in task.state]


def judge(
    task: Task, answer: str | None, states: list[str | None], final: Callable[[], FinalState]
) -> Verdict:
    """Run every check of the task: the answer, the state texts gathered after the episode
    (`state_text`), and the verifier given the final state (built only when there is a verifier)."""
    checks: dict[str, bool] = {}
    if task.answer is not None:
        checks["answer"] = answer is not None and normalise(answer) == normalise(task.answer)
    for number, (check, text) in enumerate(zip(task.state, states, strict=True)):
        checks[f"state[{number}] {check['name']}"] = (
            text is not None
            and all(s in text for s in check.get("contains", []))
            and not any(s in text for s in check.get("excludes", []))
        )
    score = None
    if task.verifier is not None:
        module, _, name = task.verifier.partition(":")
        function = getattr(import_module(module), name)
        value = function(final())
        if isinstance(value, bool) or (
            isinstance(value, (int, float)) and math.isfinite(value) and 0 <= value <= 1
        ):
            score = float(value)
        else:
            raise TaskError(
                f"task {task.id!r}: verifier {task.verifier} returned {value!r}, not a bool or a "
                "float in [0, 1]"
            )
        checks["verifier"] = score >= 1.0
    return Verdict(checks, score)
