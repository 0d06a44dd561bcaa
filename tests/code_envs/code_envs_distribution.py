"""Measures of Code-v0's task content: how many distinct specs each family draws, and how much of the
test split the train split has already shown.

    python tests/code_envs/code_envs_distribution.py --tasks 1000    # the figures in docs/code-tasks.md
    python tests/code_envs/code_envs_distribution.py --tasks 300 --cross    # and the cross-split passes

Everything is read from what a task shows and grades, not from the generator's own bookkeeping, so
the same measure applies to any version of the generator: a spec is the docstring the prompt states
(case and spacing folded); a program is one function of the starting file or of the reference
solution, with every name it defines numbered in order (an `ast` rewrite, independent of the
generator's own normalisation); a hidden case is the argument list of one graded call. A test task
counts as seen when any of its specs (or programs) appears in any train task of any family; a
hidden case counts as seen when its arguments appear among the graded calls of train.

Held out in behaviour (`--cross`): every train reference function is called, in this process, on the
hidden cases of every test function (its graded calls and expected outputs, read from the check), and
a test function counts as solved by train when some train function returns every expected output. A
fix is the pair of lines a fix_bug task's reference changes in its starting program (both programs
name-normalised as above).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import re
import signal
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from agentrl.code_envs.code_tasks import FAMILIES
from agentrl.code_envs.tasks import Task, generate

SPEC_IN_PROMPT = {
    "implement": re.compile(r"^Specification: (.*)$", re.M),
    "fix_bug": re.compile(r"^solution\.py defines \w+: (.*)$", re.M),
    "module_suite": re.compile(r"^- \w+\(.*?\)(?: -> [^:]+)?: (.*)$", re.M),
}


def specs_of(task: Task) -> set[str]:
    return {" ".join(doc.lower().split()) for doc in SPEC_IN_PROMPT[task.family].findall(task.prompt)}


def normalized_functions(source: str) -> set[str]:
    """Each top-level function of `source`, its defined names numbered, as `ast.unparse` writes it."""
    out = set()
    for node in ast.parse(source).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        defined = {node.name} | {n.arg for n in ast.walk(node) if isinstance(n, ast.arg)}
        defined |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        names: dict[str, str] = {}
        for sub in ast.walk(node):
            for attr in ("name", "arg", "id"):
                value = getattr(sub, attr, None)
                if isinstance(value, str) and value in defined and not isinstance(sub, ast.alias):
                    setattr(sub, attr, names.setdefault(value, f"v{len(names)}"))
        out.add(ast.unparse(node))
    return out


def programs_of(task: Task) -> set[str]:
    sources = [f.data().decode() for p, f in task.workspace.items() if not p.startswith("tests/")]
    sources += [args["content"] for name, args in task.solution if name == "write_file"]
    return set().union(*(normalized_functions(s) for s in sources))


def hidden_inputs(task: Task) -> list[str]:
    """The argument lists of every graded call, read from the check's own job list."""
    for cell in task.check.__closure__ or ():
        jobs = cell.cell_contents
        if isinstance(jobs, list) and jobs and all(isinstance(j, list) and len(j) == 3 for j in jobs):
            return [json.dumps(j[2], sort_keys=True) for j in jobs]
    raise LookupError(f"no job list in the check of {task.task_id}")


def graded_cases(task: Task) -> dict[str, list[tuple[str, str]]]:
    """Each graded function's hidden cases as (arguments, expected output), canonical JSON, read from
    the check's own job and expected-output lists."""
    cells = [cell.cell_contents for cell in task.check.__closure__ or ()]
    jobs = [
        c for c in cells if isinstance(c, list) and c and all(isinstance(j, list) and len(j) == 3 for j in c)
    ]
    expected = [c for c in cells if isinstance(c, list) and c and all(isinstance(e, str) for e in c)]
    if len(jobs) != 1 or len(expected) != 1 or len(jobs[0]) != len(expected[0]):
        raise LookupError(f"no job and expected-output lists in the check of {task.task_id}")
    cases: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for (_, function, args), want in zip(jobs[0], expected[0], strict=True):
        cases[function].append((json.dumps(args, sort_keys=True), want))
    return cases


def reference_functions(task: Task) -> list[Callable[..., Any]]:
    """The functions of a task's reference solution (the files it writes), executed here."""
    functions = []
    for name, args in task.solution:
        if name == "write_file":
            namespace: dict[str, Any] = {}
            exec(args["content"], namespace)  # the generator's own reference code
            defined = [n.name for n in ast.parse(args["content"]).body if isinstance(n, ast.FunctionDef)]
            functions += [namespace[n] for n in defined]
    return functions


class _CallTimeout(BaseException):
    """A reference ran past CALL_TIMEOUT_S on a foreign input (e.g. a list of a million strings)."""


CALL_TIMEOUT_S = 0.05


@contextmanager
def _time_limit() -> Iterator[None]:
    """SIGALRM raises _CallTimeout inside; a timer armed outside (pytest-timeout) is paused meanwhile."""

    def stop(*_: Any) -> None:
        raise _CallTimeout

    previous = signal.signal(signal.SIGALRM, stop)
    remaining, interval = signal.setitimer(signal.ITIMER_REAL, 0)
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if remaining:
            signal.setitimer(
                signal.ITIMER_REAL, max(remaining - (time.monotonic() - started), 1e-3), interval
            )


def _output(function: Callable[..., Any], args: str) -> str | None:
    """`function`'s output on `args` as canonical JSON; None when it raises or runs too long."""
    signal.setitimer(signal.ITIMER_REAL, CALL_TIMEOUT_S)
    try:
        return json.dumps(function(*json.loads(args)), sort_keys=True, allow_nan=False)
    except (Exception, _CallTimeout):
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def passing_references(
    references: list[Callable[..., Any]], tests: list[list[tuple[str, str]]]
) -> list[set[int]]:
    """For each test function's cases, the indices of the references that return every expected output.

    Each reference is called once per distinct argument list. Arguments that several test functions
    share are tried first, each through a table output -> references, so most references drop out
    before any argument list of a single test function is tried."""
    shared = Counter(args for cases in tests for args in {a for a, _ in cases})
    tables: dict[str, dict[str | None, set[int]]] = {}
    everyone = set(range(len(references)))
    found = []
    with _time_limit():
        for cases in tests:
            alive: set[int] | None = None
            for args, want in sorted(cases, key=lambda case: -shared[case[0]]):
                if shared[args] > 1:
                    if args not in tables:
                        tables[args] = defaultdict(set)
                        for i, function in enumerate(references):
                            tables[args][_output(function, args)].add(i)
                    hits = tables[args].get(want, set())
                    alive = hits if alive is None else alive & hits
                else:
                    alive = {
                        i
                        for i in everyone
                        if alive is None or i in alive
                        if _output(references[i], args) == want
                    }
                if not alive:
                    break
            found.append(alive or set())
    return found


def fix_of(task: Task) -> str:
    """The lines a fix_bug task's reference changes in its starting program, both name-normalised."""
    (buggy,) = normalized_functions(task.workspace["solution.py"].data().decode())
    (fixed,) = normalized_functions(next(a["content"] for n, a in task.solution if n == "write_file"))
    old, new = buggy.splitlines(), fixed.splitlines()
    changed = [
        (old[i1:i2], new[j1:j2])
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new).get_opcodes()
        if tag != "equal"
    ]
    return json.dumps(changed)


def cross(train: dict[str, list[Task]], test: dict[str, list[Task]]) -> dict[str, dict[str, float]]:
    """Share of each family's test tasks with a function some train reference solves (every hidden
    case), and of fix_bug test tasks whose fix some fix_bug train task also asks for."""
    references = [f for tasks in train.values() for t in tasks for f in reference_functions(t)]
    owners, functions = [], []
    for family, tasks in test.items():
        for k, task in enumerate(tasks):
            for cases in graded_cases(task).values():
                owners.append((family, k))
                functions.append(cases)
    solved = {
        owner for owner, hits in zip(owners, passing_references(references, functions), strict=True) if hits
    }
    figures = {
        f: {
            "test tasks with a function a train reference solves": sum(
                (f, k) in solved for k in range(len(tasks))
            )
            / len(tasks)
        }
        for f, tasks in test.items()
    }
    train_fixes = {fix_of(t) for t in train["fix_bug"]}
    figures["fix_bug"]["test tasks whose fix is a train fix"] = sum(
        fix_of(t) in train_fixes for t in test["fix_bug"]
    ) / len(test["fix_bug"])
    return figures


def draw(split: str, n: int) -> dict[str, list[Task]]:
    return {
        family: [generate(family, build, split, i) for i in range(n)] for family, build in FAMILIES.items()
    }


def measure(train: dict[str, list[Task]], test: dict[str, list[Task]]) -> dict[str, dict[str, Any]]:
    seen_specs = set().union(*(specs_of(t) for tasks in train.values() for t in tasks))
    seen_programs = set().union(*(programs_of(t) for tasks in train.values() for t in tasks))
    seen_inputs = {i for tasks in train.values() for t in tasks for i in hidden_inputs(t)}
    figures: dict[str, dict[str, Any]] = defaultdict(dict)
    for family in FAMILIES:
        tasks = test[family]
        inputs = [i for t in tasks for i in hidden_inputs(t)]
        figures[family] = {
            "distinct specs (train)": len(set().union(*(specs_of(t) for t in train[family]))),
            "distinct specs (test)": len(set().union(*(specs_of(t) for t in tasks))),
            "test tasks with a spec seen in train": sum(bool(specs_of(t) & seen_specs) for t in tasks)
            / len(tasks),
            "test tasks with a program seen in train": sum(
                bool(programs_of(t) & seen_programs) for t in tasks
            )
            / len(tasks),
            "test hidden cases seen in train": sum(i in seen_inputs for i in inputs) / len(inputs),
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description="Code-v0 task content: distinct specs, train/test overlap")
    parser.add_argument("--tasks", type=int, default=1000, help="tasks per family and split")
    parser.add_argument("--cross", action="store_true", help="also run train references on test cases")
    args = parser.parse_args()
    train, test = draw("train", args.tasks), draw("test", args.tasks)
    figures = measure(train, test)
    if args.cross:
        for family, row in cross(train, test).items():
            figures[family].update(row)
    for family, row in figures.items():
        print(family, {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()})


if __name__ == "__main__":
    main()
