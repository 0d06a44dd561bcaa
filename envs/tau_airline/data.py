"""Reading τ-bench's airline domain from a folder the user gives; nothing is downloaded or shipped.

The folder is τ-bench's `tau_bench/envs/airline` (or a copy of it): `users.json`, `flights.json`
and `reservations.json` (there or in its `data/` subfolder), the policy `wiki.md`, and the task
lists `tasks_<split>.py`. Task lists are Python source (a `TASKS = [Task(...), ...]` list, or a list
of dicts); they are read with `ast`, never imported or executed, so a task file runs no code.
"""

from __future__ import annotations

import ast
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATABASE_FILES = ("users", "flights", "reservations")
POLICY_FILE = "wiki.md"
# A file of guidelines for the simulated customer, used by the `llm` user when present.
USER_GUIDELINES_FILE = "user_guidelines.md"


@dataclass(frozen=True)
class Action:
    """One gold step: a tool call (`name`, `kwargs`), or `respond` with the text said."""

    name: str
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class Task:
    """One task: whose it is, what the customer wants (`instruction`), the gold actions and the
    outputs the agent must say to the customer."""

    index: int
    user_id: str
    instruction: str
    actions: tuple[Action, ...]
    outputs: tuple[str, ...]


@dataclass
class AirlineData:
    """The domain as read from `root`: the database documents, the policy and one task split."""

    root: Path
    split: str
    users: dict[str, Any]
    flights: dict[str, Any]
    reservations: dict[str, Any]
    policy: str
    tasks: list[Task]
    user_guidelines: str | None = None
    # the template database's image and each task's gold database, built once (see `database.py`)
    cache: dict[str, Any] = field(default_factory=dict, repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def _find(root: Path, name: str) -> Path:
    for candidate in (root / name, root / "data" / name):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"{name} not found in {root} or {root / 'data'}: data_dir must be τ-bench's airline folder "
        "(tau_bench/envs/airline of a tau-bench checkout)"
    )


def _literal(node: ast.AST) -> Any:
    """A task file's value: literals, lists, dicts, and `Task(...)`/`Action(...)` calls read as the
    dict of their keyword arguments."""
    if isinstance(node, ast.Call):
        if not (isinstance(node.func, ast.Name) and node.func.id in ("Task", "Action")) or node.args:
            raise ValueError(f"line {node.lineno}: a task file holds only literals and Task(...)/Action(...) "
                             "with keyword fields")
        return {kw.arg: _literal(kw.value) for kw in node.keywords}
    if isinstance(node, ast.List):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values, strict=True)}
    return ast.literal_eval(node)


def read_tasks(path: Path) -> list[Task]:
    """The tasks of a `tasks_<split>.py` file: the list assigned to `TASKS` (or `tasks`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in ("TASKS", "tasks") for t in statement.targets
        ):
            raw = _literal(statement.value)
            break
    else:
        raise ValueError(f"{path}: no TASKS list")
    tasks = []
    for index, item in enumerate(raw):
        try:
            actions = tuple(Action(a["name"], dict(a.get("kwargs", {}))) for a in item["actions"])
            outputs = tuple(item.get("outputs", ()))
            tasks.append(Task(index, item["user_id"], item["instruction"], actions, outputs))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{path}: task {index} is not a task ({type(exc).__name__}: {exc})") from exc
    return tasks


_LOADED: dict[tuple[str, str], AirlineData] = {}
_LOADED_LOCK = threading.Lock()


def load(data_dir: str | Path, split: str = "test") -> AirlineData:
    """The domain in `data_dir` with the tasks of `split`, read once per process."""
    root = Path(data_dir).expanduser().resolve()
    key = (str(root), split)
    with _LOADED_LOCK:
        if key in _LOADED:
            return _LOADED[key]
    if not root.is_dir():
        raise FileNotFoundError(f"data_dir {root} is not a folder")
    documents = {name: json.loads(_find(root, f"{name}.json").read_text(encoding="utf-8"))
                 for name in DATABASE_FILES}
    guidelines = root / USER_GUIDELINES_FILE
    data = AirlineData(
        root=root,
        split=split,
        users=documents["users"],
        flights=documents["flights"],
        reservations=documents["reservations"],
        policy=_find(root, POLICY_FILE).read_text(encoding="utf-8"),
        tasks=read_tasks(_find(root, f"tasks_{split}.py")),
        user_guidelines=guidelines.read_text(encoding="utf-8") if guidelines.is_file() else None,
    )
    with _LOADED_LOCK:
        return _LOADED.setdefault(key, data)
