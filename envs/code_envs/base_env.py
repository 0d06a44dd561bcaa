"""What Bash-v0 and Code-v0 share: a sandbox per episode, a seeded task in it, hidden grading.

The task is picked from the seed (or named by `options["task_id"]`); its workspace is uploaded
as one tar; after `finish` (or when turns run out) its checker runs in the same container. If the
container dies mid-episode the episode ends with `info["error"]` instead of hanging or raising.
"""

from __future__ import annotations

import contextlib
import shlex
import weakref
from typing import Any, ClassVar

from agentrl.code_envs.sandbox import SandboxCrashed, open_sandbox
from agentrl.code_envs.tasks import Grade, Task
from agentrl.code_envs.workspace import tar_bytes
from agentrl.core import StepResult, ToolEnv
from agentrl.sandbox_server import SandboxError

SETUP_TIMEOUT_S = 60.0


def _close_quietly(sandbox: Any) -> None:
    with contextlib.suppress(Exception):  # already gone: nothing left to free
        sandbox.close()


class SandboxEnv(ToolEnv):
    """A ToolEnv whose world is a container; subclasses name their task list and tools."""

    task_ids: ClassVar[tuple[str, ...]] = ()
    default_max_turns = 30
    operator_kwargs = frozenset({"sandbox_url", "sandbox_token", "image", "memory_mb"})

    def __init__(
        self,
        *,
        task_id: str | None = None,
        sandbox_url: str | None = None,
        sandbox_token: str | None = None,
        pool_size: int = 2,
        image: str | None = None,
        memory_mb: int | None = None,
        command_timeout_s: float = 30.0,
        max_output_bytes: int = 16_384,
        partial_credit: bool = False,
        max_turns: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(max_turns=max_turns, render_mode=render_mode)
        if task_id is not None:
            self._get_task(task_id)  # fail at construction on an unknown id
        self.task_id = task_id
        self.sandbox_url = sandbox_url
        self.sandbox_token = sandbox_token
        self.pool_size = pool_size
        self.image = image
        self.memory_mb = memory_mb
        self.command_timeout_s = command_timeout_s
        self.max_output_bytes = max_output_bytes
        self.partial_credit = partial_credit
        self.sandbox: Any = None
        self.task: Task | None = None
        self.answer: str | None = None
        self.grade: Grade | None = None
        self.error: str | None = None
        self._finalizer: weakref.finalize | None = None

    # --- tasks -------------------------------------------------------------------------------
    @staticmethod
    def _get_task(task_id: str) -> Task:
        raise NotImplementedError

    def _pick_task(self, options: dict[str, Any]) -> Task:
        task_id = options.get("task_id", self.task_id)
        if task_id is None:
            task_id = self.task_ids[int(self.np_random.integers(len(self.task_ids)))]
        try:
            return self._get_task(str(task_id))
        except KeyError as exc:
            raise ValueError(str(exc)) from None

    # --- sandbox lifecycle ---------------------------------------------------------------------
    def _release(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # closes the container exactly once
            self._finalizer = None
        self.sandbox = None

    def _reset_world(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self._release()
        self.task = self._pick_task(options)
        self.answer, self.grade, self.error = None, None, None
        create = {k: v for k, v in (("image", self.image), ("memory_mb", self.memory_mb)) if v is not None}
        self.sandbox = open_sandbox(
            url=self.sandbox_url, token=self.sandbox_token, pool_size=self.pool_size, **create
        )
        self._finalizer = weakref.finalize(self, _close_quietly, self.sandbox)
        try:
            self.sandbox.put_archive("/workspace", tar_bytes(self.task.workspace))
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
        except Exception:
            self._release()
            raise
        info = {"task_id": self.task.task_id, "family": self.task.family}
        return self.task.prompt, info

    def close(self) -> None:
        self._release()
        super().close()

    # --- steps, crashes and grading --------------------------------------------------------------
    def _act(self, action: str) -> StepResult:
        try:
            return super()._act(action)
        except (SandboxCrashed, SandboxError) as exc:
            self.error = f"sandbox failed: {type(exc).__name__}: {exc}"
            self._release()
            return StepResult(
                f"The sandbox stopped working ({self.error}); the episode is over.",
                0.0,
                True,
                False,
                {"error": self.error},
            )

    def _final_reward(self) -> float:
        if self.grade is None and self.task is not None and self.sandbox is not None:
            try:
                self.grade = self.task.check(self.sandbox, self.answer)
            except (SandboxError, OSError) as exc:
                self.error = f"sandbox failed while grading: {type(exc).__name__}: {exc}"
                self.grade = Grade(0, 1, self.error)
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
        if self.error is not None:
            info["error"] = self.error
        return observation, reward, terminated, truncated, info
