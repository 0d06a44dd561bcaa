"""Reading τ-bench's or τ²-bench's airline domain from a folder the user gives; nothing is
downloaded or shipped.

τ-bench's layout is its `tau_bench/envs/airline` (or a copy of it): `users.json`, `flights.json`
and `reservations.json` (there or in its `data/` subfolder), the policy `wiki.md`, and the task
lists `tasks_<split>.py`. Task lists are Python source (a `TASKS = [Task(...), ...]` list, or a list
of dicts); they are read with `ast`, never imported or executed, so a task file runs no code.

τ²-bench's layout (its `data/tau2/domains/airline`) is recognised by its database file, `db.json`
or `db.toml` ({"flights", "users", "reservations"}), beside `policy.md`, `tasks.json` (a list of
its `Task` objects) and `split_tasks.json` (task ids per split name).
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATABASE_FILES = ("users", "flights", "reservations")
POLICY_FILE = "wiki.md"
TAU_BENCH, TAU2_BENCH = "tau-bench", "tau2-bench"
TAU2_DATABASE_FILES = ("db.json", "db.toml")
TAU2_POLICY_FILE, TAU2_TASKS_FILE, TAU2_SPLIT_FILE = "policy.md", "tasks.json", "split_tasks.json"
# τ²-bench's guidelines for its simulated user, relative to the airline folder of its data tree
TAU2_USER_GUIDELINES = ("..", "..", "user_simulator", "simulation_guidelines.md")
# the reward components τ²-bench's airline tasks use (`EvaluationCriteria.reward_basis`) that need
# no model to judge
REWARD_BASES = ("DB", "COMMUNICATE", "ACTION")
# A file of guidelines for the simulated customer, used by the `llm` user when present.
USER_GUIDELINES_FILE = "user_guidelines.md"


@dataclass(frozen=True)
class Action:
    """One gold step: a tool call (`name`, `kwargs`), or `respond` with the text said."""

    name: str
    kwargs: dict[str, Any]
    # τ²-bench: the arguments an agent's call must match under the ACTION reward (None: all)
    compare_args: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Task:
    """One task: whose it is, what the customer wants (`instruction`), the gold actions, the
    outputs the agent must say to the customer, and (τ²-bench) the task's own id and which of
    those the reward counts."""

    index: int
    user_id: str
    instruction: str
    actions: tuple[Action, ...]
    outputs: tuple[str, ...]
    task_id: str | None = None
    reward_basis: tuple[str, ...] = ("DB", "COMMUNICATE")


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
    layout: str = TAU_BENCH
    # the template database's image and each task's gold database, built once (see `database.py`)
    cache: dict[str | tuple[str, int], Any] = field(default_factory=dict, repr=False)
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
        if None in node.keys:  # `**mapping`: a name to look up, not a literal
            raise ValueError(f"line {node.lineno}: a task file's dict holds keys and values, not **unpacking")
        pairs = zip(node.keys, node.values, strict=True)
        return {_literal(k): _literal(v) for k, v in pairs if k is not None}
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
    data = load_tau2(root, split) if tau2_database(root) else load_tau(root, split)
    with _LOADED_LOCK:
        return _LOADED.setdefault(key, data)


def load_tau(root: Path, split: str) -> AirlineData:
    """τ-bench's layout."""
    documents = {name: json.loads(_find(root, f"{name}.json").read_text(encoding="utf-8"))
                 for name in DATABASE_FILES}
    guidelines = root / USER_GUIDELINES_FILE
    return AirlineData(
        root=root,
        split=split,
        users=documents["users"],
        flights=documents["flights"],
        reservations=documents["reservations"],
        policy=_find(root, POLICY_FILE).read_text(encoding="utf-8"),
        tasks=read_tasks(_find(root, f"tasks_{split}.py")),
        user_guidelines=guidelines.read_text(encoding="utf-8") if guidelines.is_file() else None,
    )


# --- τ²-bench ---------------------------------------------------------------------------------
def tau2_database(root: Path) -> Path | None:
    """The τ²-bench database file in `root`, if there is one (what tells the two layouts apart)."""
    return next((root / name for name in TAU2_DATABASE_FILES if (root / name).is_file()), None)


def _whole(value: Any, where: str) -> Any:
    """A number τ²-bench's models declare an int, as pydantic's lax mode takes it (250.0 -> 250)."""
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"{where}: {value} is not a whole number")
        return int(value)
    return value


def tau2_documents(db: dict[str, Any]) -> dict[str, Any]:
    """τ²-bench's database with numbers typed as its models type them (its hash, and so its
    comparison of databases, sees the types): gift card and certificate balances are floats,
    prices, seats and payments ints. Other keys are kept as given."""
    if not isinstance(db, dict) or set(DATABASE_FILES) - set(db):
        raise ValueError(f"a τ²-bench database holds {', '.join(DATABASE_FILES)}")
    users = {}
    for user_id, user in db["users"].items():
        methods = {}
        for payment_id, method in user["payment_methods"].items():
            method = dict(method)
            if method.get("source") in ("gift_card", "certificate"):
                method["amount"] = float(method["amount"])
            methods[payment_id] = method
        users[user_id] = {**user, "payment_methods": methods}
    flights = {}
    for number, flight in db["flights"].items():
        dates = {}
        for day, state in flight["dates"].items():
            state = dict(state)
            for part in ("available_seats", "prices"):
                if part in state:
                    where = f"flight {number} {day} {part}"
                    state[part] = {c: _whole(v, where) for c, v in state[part].items()}
            dates[day] = state
        flights[number] = {**flight, "dates": dates}
    reservations = {}
    for reservation_id, r in db["reservations"].items():
        where = f"reservation {reservation_id}"
        reservations[reservation_id] = {
            **r,
            "flights": [{**f, "price": _whole(f["price"], where)} for f in r["flights"]],
            "payment_history": [{**p, "amount": _whole(p["amount"], where)} for p in r["payment_history"]],
        }
    return {"users": users, "flights": flights, "reservations": reservations}


TAB = "\t"


def tau2_instruction(scenario: dict[str, Any]) -> str:
    """A τ²-bench user scenario as its `UserScenario.__str__` writes it (what its user simulator
    reads): the persona, then the instructions (structured ones field by field)."""
    lines = []
    if scenario.get("persona") is not None:
        lines += ["Persona:", textwrap.indent(scenario["persona"], TAB)]
    instructions = scenario["instructions"]
    if isinstance(instructions, dict):
        parts = [f"Domain: {instructions['domain']}",
                 f"Reason for call:\n{textwrap.indent(instructions['reason_for_call'], TAB)}"]
        for key, title in (("known_info", "Known info"), ("unknown_info", "Unknown info")):
            if instructions.get(key) is not None:
                parts.append(f"{title}:\n{textwrap.indent(instructions[key], TAB)}")
        parts.append(f"Task instructions:\n{textwrap.indent(instructions['task_instructions'], TAB)}")
        instructions = "\n".join(parts)
    lines += ["Instructions:", textwrap.indent(str(instructions), TAB)]
    return "\n".join(lines)


_USER_ID = re.compile(r"user id is\s+([A-Za-z0-9_]+)", re.IGNORECASE)


def tau2_task(item: dict[str, Any], index: int, path: Path) -> Task:
    """One τ²-bench task. What this env cannot evaluate (an initial state, the user's own tool
    calls, assertions judged by a model or run on the env) is refused, naming the task."""
    task_id = str(item.get("id"))
    where = f"{path}: task {task_id}"
    state = item.get("initial_state") or {}
    if any(state.get(k) for k in ("initialization_data", "initialization_actions", "message_history")):
        raise ValueError(f"{where}: an initial_state is not supported")
    criteria = item.get("evaluation_criteria") or {}
    basis = tuple(criteria.get("reward_basis") or ("DB", "COMMUNICATE"))
    if unsupported := set(basis) - set(REWARD_BASES):
        raise ValueError(f"{where}: reward_basis {sorted(unsupported)} is not supported "
                         f"(supported: {', '.join(REWARD_BASES)})")
    actions = []
    for raw in criteria.get("actions") or ():
        if raw.get("requestor", "assistant") != "assistant":
            raise ValueError(f"{where}: gold actions by the user are not supported")
        compare = raw.get("compare_args")
        actions.append(Action(raw["name"], dict(raw.get("arguments") or {}),
                              None if compare is None else tuple(compare)))
    scenario = item["user_scenario"]
    instructions = scenario.get("instructions")
    known = instructions.get("known_info") if isinstance(instructions, dict) else instructions
    found = _USER_ID.search(known or "")
    return Task(index, found.group(1) if found else "", tau2_instruction(scenario), tuple(actions),
                tuple(criteria.get("communicate_info") or ()), task_id, basis)


def _toml(text: str, path: Path) -> Any:
    try:
        import tomllib  # the standard library's from Python 3.11
    except ModuleNotFoundError as exc:
        raise RuntimeError(f"{path}: reading TOML needs Python 3.11 or later; use db.json") from exc
    return tomllib.loads(text)


def load_tau2(root: Path, split: str) -> AirlineData:
    """τ²-bench's layout: the database file, policy, tasks and split file; a split's tasks in the
    task file's order."""
    db_path = tau2_database(root)
    if db_path is None:
        raise FileNotFoundError(f"no τ²-bench database file ({', '.join(TAU2_DATABASE_FILES)}) in {root}")
    text = db_path.read_text(encoding="utf-8")
    db = _toml(text, db_path) if db_path.suffix == ".toml" else json.loads(text)
    tasks_path = root / TAU2_TASKS_FILE
    items = json.loads(tasks_path.read_text(encoding="utf-8"))
    if not isinstance(items, list):
        raise ValueError(f"{tasks_path}: a list of tasks expected")
    split_path = root / TAU2_SPLIT_FILE
    splits = json.loads(split_path.read_text(encoding="utf-8"))
    if split not in splits:
        raise ValueError(f"split {split!r} is not in {split_path}; its splits: {', '.join(splits)}")
    wanted = {str(i) for i in splits[split]}
    chosen = [item for item in items if str(item.get("id")) in wanted]
    guidelines = next((p for p in (root / USER_GUIDELINES_FILE, root.joinpath(*TAU2_USER_GUIDELINES))
                       if p.is_file()), None)
    documents = tau2_documents(db)
    return AirlineData(
        root=root,
        split=split,
        users=documents["users"],
        flights=documents["flights"],
        reservations=documents["reservations"],
        policy=(root / TAU2_POLICY_FILE).read_text(encoding="utf-8"),
        tasks=[tau2_task(item, index, tasks_path) for index, item in enumerate(chosen)],
        user_guidelines=guidelines.read_text(encoding="utf-8") if guidelines else None,
        layout=TAU2_BENCH,
    )
