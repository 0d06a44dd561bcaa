"""The result of one step, as every env, the server and the clients pass it around."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class StepResult:
    """Gymnasium's 5-tuple with names, so it can travel as JSON and come back unchanged."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)

    def as_tuple(self) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self.observation, self.reward, self.terminated, self.truncated, self.info

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
