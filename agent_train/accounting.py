"""What a run owes its reader: which tasks it trained and evaluated on, and why it stopped.

`TaskLedger` keeps the task ids (`info["task_id"]`) seen in training and in evaluation and
refuses a run whose evaluation tasks show up in training. `FailureGuard` counts excluded
episodes (exceptions, template drift) and steps that trained on nothing, logs a sample
traceback, and stops the run with `TrainingAborted` naming the cause, so a run that cannot
learn never ends with a checkpoint and exit status 0.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agentrl.agent_train.rollout import RolloutEpisode


class TrainingAborted(RuntimeError):
    """The run stopped on purpose; the message names the cause."""


def takes_split(env_id: str) -> bool:
    """Whether the env's constructor accepts `split=` (the train/test contract of agentrl's envs).

    Read from the registered class's signature, so an env that has no splits yet is reported as
    such instead of failing at construction."""
    import gymnasium as gym
    import gymnasium.envs.registration

    import agentrl  # noqa: F401  (registers the ids)
    from agentrl.registration import ENV_ENTRY_POINTS, load_env_class

    if env_id in ENV_ENTRY_POINTS:
        target: Any = load_env_class(env_id)
    else:
        entry = gym.spec(env_id).entry_point
        target = gymnasium.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry
    # a class's own __init__, whose signature lists the constructor's keywords
    if isinstance(target, type):
        target = target.__init__
    try:
        return "split" in inspect.signature(target).parameters
    except (TypeError, ValueError):  # a callable without a readable signature
        return False


def split_kwargs(env_id: str, env_kwargs: dict[str, Any], split: str) -> tuple[dict[str, Any], bool]:
    """The env kwargs for one side of the run and whether the split could be applied."""
    if not split or "split" in env_kwargs:
        return dict(env_kwargs), "split" in env_kwargs
    if not takes_split(env_id):
        return dict(env_kwargs), False
    return {**env_kwargs, "split": split}, True


@dataclass
class TaskLedger:
    """Task ids per side of the run; evaluation tasks must never be trained on."""

    train: set[str] = field(default_factory=set)
    eval: set[str] = field(default_factory=set)
    unnamed: int = 0  # episodes whose env gave no task id

    def add_eval(self, episodes: Iterable[RolloutEpisode]) -> None:
        for e in episodes:
            self._add(self.eval, e)

    def add_train(self, episodes: Iterable[RolloutEpisode]) -> None:
        for e in episodes:
            self._add(self.train, e)
        shared = self.train & self.eval
        if shared:
            raise TrainingAborted(
                f"evaluation is not held out: {len(shared)} evaluation task(s) were trained on "
                f"(e.g. {sorted(shared)[0]!r})"
            )

    def _add(self, side: set[str], e: RolloutEpisode) -> None:
        if e.task_id is None:
            if e.error is None:
                self.unnamed += 1
        else:
            side.add(e.task_id)

    def summary(self) -> dict[str, Any]:
        named = bool(self.train or self.eval)
        return {
            "train_tasks": len(self.train) if named else None,
            "eval_tasks": len(self.eval) if named else None,
            "overlap": len(self.train & self.eval) if named else None,
        }


@dataclass
class FailureGuard:
    """Counts what went wrong and stops the run once it is not worth going on."""

    max_idle_steps: int  # consecutive steps with no trainable sample; 0 never stops
    max_excluded_frac: float  # excluded episodes per step (or per evaluation) above which the run stops
    log: Callable[[str], Any] = print
    idle: int = 0
    errors: int = 0
    _logged: set[str] = field(default_factory=set)

    def check_episodes(self, where: str, episodes: list[RolloutEpisode]) -> dict[str, float]:
        """Count errors and drift; log the first traceback of each new error; stop above the fraction."""
        errored = [e for e in episodes if e.error]
        drifted = [e for e in episodes if e.error is None and e.transcript.drift]
        self.errors += len(errored)
        for e in errored:
            if e.error not in self._logged and len(self._logged) < 5:
                self._logged.add(e.error or "")
                self.log(f"{where}: episode (seed {e.seed}) failed: {e.error}\n{e.trace or ''}".rstrip())
        excluded = len(errored) + len(drifted)
        if episodes and excluded / len(episodes) > self.max_excluded_frac:
            sample = errored[0].error if errored else f"drift: {drifted[0].transcript.drift}"
            raise TrainingAborted(
                f"{where}: {excluded} of {len(episodes)} episodes excluded ({len(errored)} errors, "
                f"{len(drifted)} drifted; limit {self.max_excluded_frac:.0%}); first: {sample}"
            )
        return {"errors": float(len(errored)), "drift": float(len(drifted))}

    def check_trained(self, step: int, samples: int, why: str) -> None:
        """Warn on a step that trained on nothing; stop after `max_idle_steps` in a row."""
        if samples:
            self.idle = 0
            return
        self.idle += 1
        self.log(f"warning: step {step} has no trainable sample ({why})")
        if self.max_idle_steps and self.idle >= self.max_idle_steps:
            raise TrainingAborted(
                f"{self.idle} steps in a row had no trainable sample (last: {why}); nothing is being learned"
            )
