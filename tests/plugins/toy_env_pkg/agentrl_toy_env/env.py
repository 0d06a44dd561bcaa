"""Counter-v0: add to a counter until it reaches the seeded target, then finish. Unseeded-v0: the
same, with a target the seed does not choose."""

from __future__ import annotations

import random
from typing import Any

from pydantic import BaseModel, Field

from agentrl.core import ToolEnv, tool


class AddArgs(BaseModel):
    n: int = Field(description="How much to add (1 to 9).", ge=1, le=9)


class CounterEnv(ToolEnv):
    """Reach the target with `add`, then call `finish`: reward 1."""

    default_max_turns = 10
    fork_by_copy = True

    def _target(self) -> int:
        return int(self.np_random.integers(3, 12))

    def _reset_world(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self._goal, self._count = self._target(), 0
        return f"Bring the counter from 0 to {self._goal} with the add tool, then call finish.", {}

    @tool("Add n to the counter.")
    def add(self, args: AddArgs) -> str:
        self._count += args.n
        return f"the counter is {self._count}"

    @tool("End the episode.", ends_episode=True)
    def finish(self) -> str:
        return "finished"

    def _final_reward(self) -> float:
        return float(self._count == self._goal)


class UnseededEnv(CounterEnv):
    """A broken env: its target comes from Python's global generator, not the episode's seed."""

    def _target(self) -> int:
        return random.randint(3, 1_000_000)
