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
    """Say the seeded secret word back through `finish`: the smallest tool env.

    ## Description
    Reset draws one of eight words (alpha to hotel) from the seed, and the agent must send it back with
    the `finish` tool. There is no world to speak of, so what is measured on it is the machinery around
    envs alone (server, clients, trainers).

    ## Action Space
    Text (`TextSpace`, at most `max_action_chars` characters): tool calls written as
    `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, up to 8 a turn. The tools are
    `echo(text)`, which sends the text back, and `finish(answer)`, which ends the episode.

    ## Observation Space
    Text (`TextSpace`, clipped to `max_observation_chars`): first the task and the tools' JSON schemas,
    then each turn's tool results inside `<tool_response>` tags. A malformed or unknown call, a text with
    no call, or an over-long action comes back as an error message: an observation, never an exception.

    ## Rewards
    1 when `finish`'s answer, stripped and lower-cased, is the word; otherwise 0.

    ## Starting State
    The task "Reply with the word '<word>' using the finish tool." and the tools; `info["secret"]` is the
    word, `info["tools"]` the tools' schemas.

    ## Episode End
    - Termination: `finish` is called.
    - Truncation: after `max_turns` steps (default 8), with reward 0 (no answer was given).

    ## Arguments
    `gym.make("agentrl/Echo-v0", max_turns=8, max_action_chars=65_536, max_observation_chars=262_144)`
    (`render_mode="ansi"` renders the transcript).
    """

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
