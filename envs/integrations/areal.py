"""agentrl envs for AReaL: a `RolloutWorkflow` that plays one agentrl episode through AReaL's
inference engine and returns the trajectory with its loss mask.

AReaL's rollout controller awaits `workflow.arun_episode(engine, data)` for each dataset row and
trains on the tensors it returns. Here the row picks the episode (`seed`, `split`, `options`), the
env's first observation is the prompt, each `engine.agenerate` reply is appended exactly as sampled
(`loss_mask` 1, its logprobs and policy versions kept), its text is the env's action, and the env's
observation is appended as the chat template renders it (`loss_mask` 0), until the env ends the
episode. The env's reward is `rewards`.

    workflow = AgentrlWorkflow("agentrl/Flights-v0", gconfig=config.gconfig, tokenizer=tokenizer,
                               base_url="http://127.0.0.1:8000")
    trainer.train(workflow=workflow)   # or rollout.submit(row, workflow=workflow)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import uuid4

import torch
from areal.api import InferenceEngine, ModelRequest, RolloutWorkflow  # pyright: ignore[reportMissingImports]  # optional, not installed where the check runs
from areal.api.cli_args import GenerationHyperparameters  # pyright: ignore[reportMissingImports]  # optional, not installed where the check runs

from agentrl.integrations.episode import EnvSource
from agentrl.integrations.tokens import TokenEpisode


class AgentrlWorkflow(RolloutWorkflow):
    """One agentrl episode per `arun_episode`, in AReaL's trajectory format (batch of one).

    `system` messages open every conversation; `max_new_tokens` of `gconfig` bounds each reply and
    the env's `max_turns` (in `env_kwargs`) the episode.
    """

    def __init__(self, env_id: str, *, gconfig: GenerationHyperparameters, tokenizer: Any,
                 base_url: str | None = None, token: str | None = None,
                 env_kwargs: Mapping[str, Any] | None = None,
                 system: Sequence[Mapping[str, Any]] = ()) -> None:
        self.source = EnvSource(env_id, base_url, token, dict(env_kwargs or {}))
        self.gconfig = gconfig.new_with_stop_and_pad_token_ids(tokenizer)
        self.tokenizer = tokenizer
        self.system = [dict(m) for m in system]

    async def arun_episode(self, engine: InferenceEngine, data: dict[str, Any]) -> dict[str, torch.Tensor]:
        episode = TokenEpisode(self.source, self.tokenizer)
        sampled_versions: list[int] = []
        try:
            await episode.open(data, self.system)
            while not episode.done:
                request = ModelRequest(rid=uuid4().hex, input_ids=episode.ids,
                                       gconfig=self.gconfig.new(n_samples=1), tokenizer=self.tokenizer)
                response = await engine.agenerate(request)
                if len(response.output_versions) != len(response.output_tokens):
                    raise ValueError("the engine returned a policy version per token for some tokens only")
                sampled_versions += list(response.output_versions)
                await episode.act(response.output_tokens, response.output_logprobs)
        finally:
            await episode.close()
        versions = iter(sampled_versions)
        trajectory = {
            "input_ids": torch.tensor(episode.ids, dtype=torch.int32),
            "logprobs": torch.tensor(episode.logprobs, dtype=torch.float32),
            "loss_mask": torch.tensor(episode.mask, dtype=torch.int32),
            "versions": torch.tensor([next(versions) if m else -1 for m in episode.mask], dtype=torch.int32),
            "rewards": torch.tensor(episode.reward, dtype=torch.float32),
            "attention_mask": torch.ones(len(episode.ids), dtype=torch.bool),
        }
        return {key: value.unsqueeze(0) for key, value in trajectory.items()}
