"""Echo-v0: the smallest tool env, for testing and benchmarking the machinery around envs.

It has no world to speak of, so server and client overheads measured on it are overheads alone.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from agentrl.core import ToolEnv, tool


class EchoArgs(BaseModel):
    text: str = Field(description="Text to send back.")


class FinishArgs(BaseModel):
    answer: str = Field(description="The final answer.")


class EchoEnv(ToolEnv):
    """Say the seeded secret word back through `finish` to earn reward 1."""

    default_max_turns = 8
    fork_by_copy = True  # its state is a word and an answer

    def _reset_world(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
        self._secret = words[int(self.np_random.integers(len(words)))]
        self._answer: str | None = None
        return f"Reply with the word '{self._secret}' using the finish tool.", {"secret": self._secret}

    @tool("Send text back unchanged.")
    def echo(self, args: EchoArgs) -> str:
        return args.text

    @tool("End the episode with a final answer.", ends_episode=True)
    def finish(self, args: FinishArgs) -> str:
        self._answer = args.answer
        return "episode finished"

    def _final_reward(self) -> float:
        return float(self._answer is not None and self._answer.strip().lower() == self._secret)
