"""A scripted generation backend: the test double for a model that must say specific things.

A random model cannot be asked to emit a given tool call, so transcript tests script the
sampled ids; everything around them (chat template, env, masking) is real.
"""

from __future__ import annotations

from typing import Any

from agentrl.agent_train.backends import Generation


class ScriptedBackend:
    def __init__(self, tokenizer: Any, turns: list[list[int] | str], logprob: float = -0.5) -> None:
        self.tokenizer, self.turns, self.logprob = tokenizer, list(turns), logprob
        self.version = 0
        self.generated_tokens = 0
        self.busy_s = 0.0
        self.sampled: list[list[int]] = []
        self.suppress_ids: list[int] = []

    async def generate(
        self, prompt_ids: list[int], max_new_tokens: int, seed: int | None = None
    ) -> Generation:
        turn = self.turns.pop(0)
        if isinstance(turn, str):
            turn = [*self.tokenizer.encode(turn, add_special_tokens=False), self.tokenizer.eos_token_id]
        ids = turn[:max_new_tokens]
        self.sampled.append(ids)
        self.generated_tokens += len(ids)
        return Generation(ids, [self.logprob - 0.01 * i for i in range(len(ids))], self.version, True)

    def update_weights(self, state_dict: dict[str, Any], version: int) -> None:
        self.version = version
