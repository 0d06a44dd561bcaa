"""What Bash-v0 and Code-v0 share: a sandbox per episode, a generated task in it, host-side grading.

`reset(seed=s, options={"family": ..., "split": ...})` generates task number `s` of the family
(chosen from the seed when not given) in the split (see `tasks.generate`); its workspace is uploaded
as one tar. After `finish` (or when turns run out) every process the agent started is killed
(`reset_processes`) and the task's check runs one-shot commands to gather facts, judged here on the
host. A container that dies, or a reply from the sandbox that is not what the protocol says, ends
the episode with `info["error"]` instead of hanging or raising.

`fork(n)` replays the episode into fresh containers (`agentrl.core.fork.replay_env`): the same task,
then every action again, so a fork costs a container from the pool plus each command once more.
What the tasks act on replays exactly (files, the shell's cwd and variables, the interpreter's
state); what does not: the wall clock (`date`, file times), process ids, `$RANDOM` and
`/dev/urandom`, host names, and anything that depends on timing (a command near its timeout,
background jobs racing). A step's result is its observation (output and exit status), reward,
end flags and what it changed in the workspace: at reset and after every step that ran a tool able
to write, a one-shot listing of the workspace (kind, mode and content hash of every entry; no
times) is compared with the one before, and the paths that changed, with their new descriptions,
are the step's `state_change` in the trajectory record. Steps whose replayed result differs in any
of these are listed in the fork's `fork_divergence`, including a step whose output matches while a
file it wrote differs; the fork keeps the parent's transcript, the one its policy continues from.
"""

from __future__ import annotations

import contextlib
import shlex
import weakref
from typing import Any, ClassVar

from pydantic import ValidationError

from agentrl.code_envs.sandbox import SandboxCrashed, open_sandbox
from agentrl.code_envs.tasks import SPLITS, Builder, Grade, Task, generate
from agentrl.code_envs.workspace import changes, listing, tar_bytes
from agentrl.core import StepResult, ToolEnv
from agentrl.sandbox_server import SandboxError

SETUP_TIMEOUT_S = 60.0
WRITING_TOOLS = frozenset({"execute_bash", "run_python", "write_file"})  # steps whose changes are listed
INDEX_RANGE = 2**31  # task numbers drawn when no seed names one
# A sandbox that fails, or answers with something that is not a valid reply, ends the episode.
SANDBOX_FAILURES = (SandboxCrashed, SandboxError, ValidationError)


def _close_quietly(sandbox: Any) -> None:
    with contextlib.suppress(Exception):  # already gone: nothing left to free
        sandbox.close()


class SandboxEnv(ToolEnv):
    """A ToolEnv whose world is a container; subclasses name their task families and tools."""

    task_families: ClassVar[dict[str, Builder]] = {}
    default_max_turns = 30
    operator_kwargs = frozenset({"sandbox_url", "sandbox_token", "image", "memory_mb", "privileged_info"})
    reset_options = frozenset({"family", "split"})

    def __init__(
        self,
        *,
        families: tuple[str, ...] | list[str] | None = None,
        split: str = "train",
        sandbox_url: str | None = None,
        sandbox_token: str | None = None,
        pool_size: int = 2,
        image: str | None = None,
        memory_mb: int | None = None,
        command_timeout_s: float = 30.0,
        max_output_bytes: int = 16_384,
        partial_credit: bool = False,
        privileged_info: bool = False,
        max_turns: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(max_turns=max_turns, render_mode=render_mode)
        self.families = tuple(families or self.task_families)
        for family in self.families:
            self._check_choice(family, split)
        self.split = split
        self.sandbox_url = sandbox_url
        self.sandbox_token = sandbox_token
        self.pool_size = pool_size
        self.image = image
        self.memory_mb = memory_mb
        self.command_timeout_s = command_timeout_s
        self.max_output_bytes = max_output_bytes
        self.partial_credit = partial_credit
        self.privileged_info = privileged_info
        self.sandbox: Any = None
        self.task: Task | None = None
        self.answer: str | None = None
        self.grade: Grade | None = None
        self.error: str | None = None
        self._seed: int | None = None
        self._finalizer: weakref.finalize | None = None
        self._listing: dict[str, str] | str | None = None  # the workspace after the last step

    # --- tasks -------------------------------------------------------------------------------
    @classmethod
    def _check_choice(cls, family: str, split: str) -> None:
        if family not in cls.task_families:
            raise ValueError(f"unknown task family {family!r}; choose from {tuple(cls.task_families)}")
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, not {split!r}")

    @classmethod
    def make_task(cls, family: str, split: str, index: int) -> Task:
        """Task number `index` of `family` in `split`: what `reset(seed=index, options=...)` plays."""
        cls._check_choice(family, split)
        return generate(family, cls.task_families[family], split, index)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        self._seed = seed
        return super().reset(seed=seed, options=options)

    def _pick_task(self, options: dict[str, Any]) -> Task:
        if unknown := set(options) - self.reset_options:
            raise ValueError(f"unknown reset options {sorted(unknown)}; known: {sorted(self.reset_options)}")
        family = options.get("family") or self.families[int(self.np_random.integers(len(self.families)))]
        index = self._seed if self._seed is not None else int(self.np_random.integers(INDEX_RANGE))
        return self.make_task(family, options.get("split", self.split), index)

    # --- sandbox lifecycle ---------------------------------------------------------------------
    def _release(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # closes the container exactly once
            self._finalizer = None
        self.sandbox = None

    def _reset_world(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self._release()
        self.task = self._pick_task(options)
        self.answer, self.grade, self.error, self._listing = None, None, None, None
        create = {k: v for k, v in (("image", self.image), ("memory_mb", self.memory_mb)) if v is not None}
        self.sandbox = open_sandbox(
            url=self.sandbox_url, token=self.sandbox_token, pool_size=self.pool_size, **create
        )
        self._finalizer = weakref.finalize(self, _close_quietly, self.sandbox)
        try:
            self.sandbox.put_archive(".", tar_bytes(self.task.workspace))
            modes = [
                f"chmod {oct(f.mode)[2:]} {shlex.quote(p)}"
                for p, f in self.task.workspace.items()
                if f.mode != 0o644
            ]
            setup = " && ".join([*modes, self.task.setup] if self.task.setup else modes)
            if setup:
                out = self.sandbox.exec(
                    setup, timeout_s=SETUP_TIMEOUT_S, mode="oneshot", stdin=self.task.setup_stdin
                )
                if out.status != "ok":
                    raise RuntimeError(f"task setup failed: {out.status} {out.stderr[-500:]}")
            self._listing = listing(self.sandbox)
        except Exception:
            self._release()
            raise
        info: dict[str, Any] = {"task_id": self.task.task_id}
        if self.privileged_info:
            info["task"] = self.task.privileged()
        return self.task.prompt, info

    def close(self) -> None:
        self._release()
        super().close()

    # --- steps, crashes and grading --------------------------------------------------------------
    def _act(self, action: str) -> StepResult:
        try:
            return super()._act(action)
        except SANDBOX_FAILURES as exc:
            self.error = f"sandbox failed: {type(exc).__name__}: {str(exc)[:500]}"
            self._release()
            return StepResult(
                f"The sandbox stopped working ({self.error}); the episode is over.",
                0.0,
                True,
                False,
                {"error": self.error},
            )

    def _world_state(self) -> dict[str, str] | str | None:
        """The workspace listing (path: kind, mode, size and digest) as of the last step that could
        write; the shell's own state (variables, working directory) is not read."""
        return self._listing

    def _state_change(self) -> dict[str, Any] | None:
        """What the step changed in the workspace (`workspace.changes`); None once the container is
        gone (after grading, or a crash). Replayed forks compare it step by step."""
        if self.sandbox is None or self._listing is None:
            return None
        if not any(c.get("name") in WRITING_TOOLS for c in self._step_calls):
            return None  # nothing the agent ran could write; a later listing sees any late change
        try:
            now = listing(self.sandbox)
        except SANDBOX_FAILURES as exc:  # recorded; the next action finds out whether the sandbox is gone
            now = f"workspace listing failed: {type(exc).__name__}: {str(exc)[:200]}"
        change = {"workspace": changes(self._listing, now)}
        self._listing = now
        return change

    def _final_reward(self) -> float:
        if self.grade is None and self.task is not None and self.sandbox is not None:
            try:
                self.sandbox.reset_processes()  # nothing the agent started runs while it is judged
                self.grade = self.task.check(self.sandbox, self.answer)
            except (*SANDBOX_FAILURES, OSError) as exc:
                self.error = f"sandbox failed while grading: {type(exc).__name__}: {str(exc)[:500]}"
                self.grade = Grade(0, 1, False, 0, self.error)
            self._release()  # graded: the container has nothing left to do
        if self.grade is None:
            return 0.0
        return self.grade.score if self.partial_credit else float(self.grade.solved)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = super().step(action)
        if self.grade is not None:
            info.update(
                tests_passed=self.grade.passed,
                tests_total=self.grade.total,
                score=self.grade.score,
                solved=self.grade.solved,
            )
            if self.grade.malformed:
                info["malformed_report"] = self.grade.malformed
        if self.error is not None:
            info["error"] = self.error
        return observation, reward, terminated, truncated, info
