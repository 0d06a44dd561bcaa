"""What a task is, and how one is generated: a seeded workspace, a prompt, a host-side check and a
reference solution.

A family is a builder `(random.Random, split) -> Task`: every file, name, number and bug comes from
the RNG, so the task space is unbounded. `generate` seeds the RNG from (family, split, index) and
keeps drawing until the task's fingerprint (a hash of everything the agent can see: prompt, files,
setup) falls in the requested split's bucket. A task therefore belongs to exactly one split by its
content alone: train and test are disjoint by construction, whatever index or seed produced them,
and the fingerprint is also the task's opaque `task_id`.

Distinct fingerprints are not enough where tasks are made of parts that recur: a Code-v0 function,
fix or test input seen in train must not come back in a test task under new names or new words. Such
builders use `split` to draw each part from the split's own half of the content space
(`content_split`: a hash of the part's normalised text, or for a function of what it computes, see
`code_probes`), so the parts of the two splits are disjoint too; builders without recurring parts
ignore it.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agentrl.code_envs.workspace import FileTree
from agentrl.core.parsing import tool_call

if TYPE_CHECKING:
    from agentrl.sandbox_server import Sandbox

SPLITS = ("train", "test")
TEST_SHARE = 4  # one fingerprint bucket in four is held out
CONTENT_TEST_SHARE = 2  # one part (spec, program, test input) in two belongs to the test split
MAX_DRAWS = 400  # a draw is kept with probability >= 1/8 (bucket, then validity): never reached


@dataclass(frozen=True)
class Grade:
    """The verdict of a check, computed on the host.

    `passed` of `total` counted checks; `solved` means everything the task asks holds (for Code-v0
    that includes cases the starting code already passed, which do not count toward `total`);
    `regressions` are counted against partial credit. `detail` is for logs, never for the agent.
    `malformed` says why what the container reported could not be read (the grade is then 0).
    """

    passed: int
    total: int
    solved: bool
    regressions: int = 0
    detail: str = ""
    malformed: str = ""

    @property
    def score(self) -> float:
        if self.solved:
            return 1.0
        return max(0, self.passed - self.regressions) / self.total if self.total else 0.0


def all_or_nothing(passed: int, total: int, detail: str = "") -> Grade:
    return Grade(passed, total, total > 0 and passed == total, 0, detail)


def malformed(total: int, reason: str) -> Grade:
    """The grade of a report that does not parse: nothing passes, and the reason is kept."""
    return Grade(0, total, False, 0, f"malformed report: {reason}", reason)


Check = Callable[["Sandbox", "str | None"], Grade]


@dataclass(frozen=True)
class Task:
    family: str
    prompt: str
    workspace: FileTree
    check: Check
    solution: tuple[tuple[str, dict[str, Any]], ...]  # reference tool calls, played one per turn
    setup: str = ""  # shell run once (one-shot) after the upload, e.g. building a git history
    setup_stdin: str | None = None  # fed to `setup`, so helper data never lands in the workspace
    answer: str | None = None  # the expected final answer of question families (privileged)
    task_id: str = ""  # set by `generate`: the fingerprint
    split: str = ""
    index: int = -1
    meta: dict[str, Any] = field(default_factory=dict)

    def fingerprint(self) -> str:
        """A hash of what the agent can observe; equal for two draws that look the same."""
        parts = [self.prompt.encode(), self.setup.encode(), (self.setup_stdin or "").encode()]
        for path in sorted(self.workspace):
            item = self.workspace[path]
            parts += [path.encode(), item.mode.to_bytes(4, "big"), item.data()]
        digest = hashlib.sha256()
        for part in parts:
            digest.update(len(part).to_bytes(8, "big") + part)
        return digest.hexdigest()

    def privileged(self) -> dict[str, Any]:
        """What an operator (oracle, SFT export) may see and a policy must not."""
        return {"family": self.family, "index": self.index, "split": self.split, "answer": self.answer}


class Redraw(ValueError):
    """This draw does not make a good task (e.g. no hidden case exposes the bug): draw again."""


Builder = Callable[[random.Random, str], Task]


def split_of(fingerprint: str) -> str:
    return "test" if int(fingerprint[16:24], 16) % TEST_SHARE == 0 else "train"


def content_split(kind: str, text: str) -> str:
    """The split a part of a task belongs to: `kind` ("behaviour", "fix", "case") and its normalised
    text, hashed. Every task of a split is built from parts of that split only."""
    digest = hashlib.sha256(f"{kind}\0{text}".encode()).digest()
    return "test" if int.from_bytes(digest[:4], "big") % CONTENT_TEST_SHARE == 0 else "train"


def generate(family: str, build: Builder, split: str, index: int) -> Task:
    """The `index`-th task of `family` in `split` (string seeds keep `random.Random` stable)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    for draw in range(MAX_DRAWS):
        try:
            task = build(random.Random(f"{family}/{split}/{index}/{draw}"), split)
        except Redraw:
            continue
        fingerprint = task.fingerprint()
        if split_of(fingerprint) == split:
            return replace(task, task_id=fingerprint[:16], split=split, index=index)
    raise RuntimeError(f"no {split} task of {family} in {MAX_DRAWS} draws")  # a bucket bug


def call(name: str, **arguments: Any) -> tuple[str, dict[str, Any]]:
    return name, arguments


def as_action(reference: tuple[str, dict[str, Any]]) -> str:
    """One reference call in the raw-text format a model writes."""
    name, arguments = reference
    return tool_call(name, **arguments)
