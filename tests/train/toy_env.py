"""PickWord: a one-or-two-turn env where success is reachable by a tiny random-init model.

It exists to prove that the trainer learns: the prompt names a thing, the reward asks for its
colour among four options; a wrong first answer gets one retry at half reward. The tests register
it (importing this module) under an id of their own; agentrl's code knows nothing of it.
"""

from __future__ import annotations

import copy
import re
from typing import Any, ClassVar

import gymnasium as gym

ENV_ID = "agentrl-test/PickWord-v0"
CUES: dict[str, str] = {"fire": "red", "grass": "green", "sky": "blue", "snow": "white"}
OPTIONS = tuple(CUES.values())
RETRY = "Wrong. Try again."


def prompt(cue: str) -> str:
    return f"{cue}?"


def corpus() -> list[str]:
    """Texts the test tokenizer is trained on: every prompt and answer, so each colour is one token."""
    lines = [prompt(c) for c in CUES] + [RETRY] + [" " + o for o in OPTIONS] + list(OPTIONS)
    return lines * 20


class AnyText(gym.spaces.Text):
    """Any string up to a length (gymnasium's Text only admits alphanumerics)."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length


class PickWordEnv(gym.Env[str, str]):
    metadata: ClassVar[dict[str, Any]] = {"render_modes": [], "render_fps": 4}

    def __init__(self, max_turns: int = 2) -> None:
        self.max_turns = max_turns
        self.observation_space = AnyText(max_length=256)
        self.action_space = AnyText(max_length=4096)
        self._cue = "fire"
        self._turn = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        # consecutive seeds cycle through the cues, so a step's groups (and the held-out set)
        # hold every cue equally often and no colour is favoured regardless of the cue
        pick = seed if seed is not None else int(self.np_random.integers(len(CUES)))
        self._cue = list(CUES)[pick % len(CUES)]
        self._turn = 0
        return prompt(self._cue), {"answer": CUES[self._cue]}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._turn += 1
        said = {w for w in re.findall(r"[a-z]+", action.lower()) if w in OPTIONS}
        info = {"success": said == {CUES[self._cue]}}
        if info["success"]:
            reward = 1.0 if self._turn == 1 else 0.5
            return "Correct.", reward, True, False, info
        if self._turn >= self.max_turns:
            return "Wrong.", 0.0, True, False, info
        return RETRY, 0.0, False, False, info


    def fork(self, n: int = 1) -> list[PickWordEnv]:
        """n copies in this episode's state (what branch credit continues from)."""
        return [copy.deepcopy(self) for _ in range(n)]


def register() -> None:
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point=PickWordEnv)


register()
