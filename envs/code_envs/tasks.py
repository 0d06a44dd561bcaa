"""What a task is: a seeded workspace, a prompt, a hidden check and a reference solution.

Tasks are plain data built from a family and a variant number, so the same id always yields the
same workspace, prompt and checker (the variant's parameters come from a string-seeded RNG).
Checks run inside the episode's container after `finish`; the agent never sees them.
"""

from __future__ import annotations

import json
import random
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentrl.code_envs.workspace import FileTree

if TYPE_CHECKING:
    from agentrl.sandbox_server import Sandbox

CHECK_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Grade:
    """How many hidden checks passed; `detail` is for logs and info, never shown to the agent."""

    passed: int
    total: int
    detail: str = ""

    @property
    def score(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @property
    def solved(self) -> bool:
        return self.total > 0 and self.passed == self.total


Check = Callable[["Sandbox", "str | None"], Grade]


@dataclass(frozen=True)
class Task:
    task_id: str
    family: str
    prompt: str
    workspace: FileTree
    check: Check
    solution: tuple[tuple[str, dict[str, Any]], ...]  # reference tool calls, played one per turn
    setup: str = ""  # shell run once after the upload (e.g. building a git history)
    setup_stdin: str | None = None  # fed to `setup`, so helper data never lands in the workspace
    meta: dict[str, Any] = field(default_factory=dict)


def variant_rng(family: str, variant: int) -> random.Random:
    """The RNG of one variant: string seeds make `random.Random` stable across runs and versions."""
    return random.Random(f"{family}/{variant}")


def call(name: str, **arguments: Any) -> tuple[str, dict[str, Any]]:
    return name, arguments


def as_action(tool_call: tuple[str, dict[str, Any]]) -> str:
    """One reference call in the raw-text format a model writes."""
    name, arguments = tool_call
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


# --- check builders -------------------------------------------------------------------------
def _norm(text: str) -> str:
    return " ".join(text.strip().strip("`'\".").split()).lower()


def answer_is(expected: str | int, *, path: bool = False) -> Check:
    """The final answer equals `expected` (case and surrounding whitespace/quotes ignored)."""
    want = _norm(str(expected))

    def check(_: Sandbox, answer: str | None) -> Grade:
        got = _norm(answer or "")
        if path:
            got = got.removeprefix("./")
        return Grade(int(got == want), 1, f"answer {got!r}, expected {want!r}")

    return check


def shell_prints(command: str, expected: str) -> Check:
    """A command run in the final workspace prints `expected` (surrounding whitespace ignored)."""

    def check(sandbox: Sandbox, _: str | None) -> Grade:
        out = sandbox.exec(command, timeout_s=CHECK_TIMEOUT_S)
        ok = out.status == "ok" and out.exit_code == 0 and out.stdout.strip() == expected.strip()
        return Grade(int(ok), 1, f"{command!r} -> {out.status} {out.exit_code} {out.stdout[-200:]!r}")

    return check


def json_file_equals(path: str, expected: Any) -> Check:
    """The workspace file `path` holds JSON equal to `expected`."""
    script = (
        "import json,sys\n"
        "try:\n    got = json.load(open(sys.argv[1]))\n"
        "except Exception as e:\n    print('bad', e); sys.exit()\n"
        "print('same' if got == json.loads(sys.argv[2]) else 'different')"
    )
    command = f"python3 -c {shlex.quote(script)} {shlex.quote(path)} {shlex.quote(json.dumps(expected))}"
    return shell_prints(command, "same")


def all_of(*checks: Check) -> Check:
    """Every part must pass; each counts as one hidden check."""

    def check(sandbox: Sandbox, answer: str | None) -> Grade:
        grades = [c(sandbox, answer) for c in checks]
        return Grade(
            sum(g.passed for g in grades), sum(g.total for g in grades), "; ".join(g.detail for g in grades)
        )

    return check
