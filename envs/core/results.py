"""The result of one step: the one shape every env, the server and the clients pass around.

On the wire it travels as its own JSON object (`agentrl.protocol` encodes it and declares it in
the API schema as is), so a step goes `StepResult` -> bytes -> `StepResult`, and becomes
Gymnasium's 5-tuple only where the Gymnasium API asks for one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class StepResult:
    """Gymnasium's 5-tuple with names, so it can travel as JSON and come back unchanged."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, step: tuple[Any, Any, Any, Any, Any]) -> StepResult:
        """The result of `env.step`, with plain types: a finite float reward and bool flags
        (envs may return numpy scalars, and JSON has no NaN). The one way a step's result is built,
        wherever the step ran or was read: the server, the episode driver in-process, the clients
        (`agentrl.protocol.step_result`), so that a step answers alike on each path."""
        observation, reward, terminated, truncated, info = step
        reward = float(reward)
        return cls(observation, reward if math.isfinite(reward) else 0.0, bool(terminated), bool(truncated),
                   info)

    def as_tuple(self) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self.observation, self.reward, self.terminated, self.truncated, self.info
