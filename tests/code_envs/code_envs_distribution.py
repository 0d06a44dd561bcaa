"""Measures of Code-v0's task content: how many distinct specs each family draws, and how much of the
test split the train split has already shown.

    python tests/code_envs/code_envs_distribution.py --tasks 1000    # the figures in docs/code-tasks.md

Everything is read from what a task shows and grades, not from the generator's own bookkeeping, so
the same measure applies to any version of the generator: a spec is the docstring the prompt states
(case and spacing folded); a program is one function of the starting file or of the reference
solution, with every name it defines numbered in order (an `ast` rewrite, independent of the
generator's own normalisation); a hidden case is the argument list of one graded call. A test task
counts as seen when any of its specs (or programs) appears in any train task of any family; a
hidden case counts as seen when its arguments appear among the graded calls of train.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from collections import defaultdict
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
    args = parser.parse_args()
    figures = measure(draw("train", args.tasks), draw("test", args.tasks))
    for family, row in figures.items():
        print(family, {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()})


if __name__ == "__main__":
    main()
