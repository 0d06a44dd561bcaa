"""agentrl envs for OpenRLHF: the agent file its `--train.agent_func_path` option loads.

OpenRLHF's rollout actor imports the file, takes its `AgentExecutor` class (a subclass of
`AgentExecutorBase`), builds it without arguments and awaits `execute(prompt, label, ...)` once per
sample, with the vLLM engine and the tokenizer. The file is two lines:

    # agentrl_agent.py
    from agentrl.integrations.openrlhf import agent_executor
    AgentExecutor = agent_executor("agentrl/Flights-v0", base_url="http://127.0.0.1:8000")

    python -m openrlhf.cli.train_ppo_ray ... --train.agent_func_path agentrl_agent.py

The dataset's label picks the episode: a mapping or its JSON text with `seed`, `split`, `options`.
`AgentInstance` is OpenRLHF's per-sample env: `reset` opens the episode and returns its task as the
observation, `step` sends the model's text as the action and returns the env's observation as
`environment_feedback`, with `rewards`, `scores` (the episode's reward so far) and `done`. The
executor keeps the tokens itself, by agent-train's rule (`agentrl.integrations.tokens`): the ids
are exactly those vLLM saw and produced, `action_ranges` cover the generated ids, and everything
the env and the chat template added is outside them. The dataset's prompt is echoed, not shown to
the model: the env's task is the prompt.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from copy import deepcopy
from typing import Any

import torch
from openrlhf.utils.agent import AgentExecutorBase, AgentInstanceBase  # pyright: ignore[reportMissingImports]  # optional, not installed where the check runs

from agentrl.integrations.episode import AsyncRowEpisode, EnvSource
from agentrl.integrations.tokens import TokenTranscript


def episode_row(label: Any) -> Mapping[str, Any]:
    """The episode a dataset label asks for: a mapping, or its JSON text, or nothing (the env's default)."""
    if label is None or label == "":
        return {}
    if isinstance(label, str):
        try:
            label = json.loads(label)
        except json.JSONDecodeError as exc:
            raise ValueError(f"a label must be JSON with seed/split/options, got {label[:80]!r}") from exc
    if not isinstance(label, Mapping):
        raise ValueError(f"a label must be a mapping with seed/split/options, got {type(label).__name__}")
    return label


class AgentrlAgentInstance(AgentInstanceBase):
    """One agentrl episode in OpenRLHF's `AgentInstance` shape (text in, text out)."""

    source: EnvSource

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.episode = AsyncRowEpisode.owning(self.source)

    async def reset(self, states: dict, **kwargs: Any) -> dict:
        observation = await self.episode.start(episode_row(states.get("label")))
        return {**states, "observation": observation}

    async def step(self, state_dict: dict, **kwargs: Any) -> dict:
        result = await self.episode.step(state_dict["action_text"])
        return {
            "rewards": torch.tensor(result.reward),
            "scores": torch.tensor(self.episode.reward),
            "environment_feedback": result.observation,
            "done": self.episode.done,
            "extra_logs": {"agentrl_done": float(self.episode.done)},
        }

    async def close(self) -> None:
        """Delete the server-side episode, then the client; safe to call twice."""
        await self.episode.close()


class AgentrlAgentExecutor(AgentExecutorBase):
    """Plays an `AgentInstance` with vLLM token in/token out; returns OpenRLHF's rollout record."""

    agent_instance_cls: type[AgentrlAgentInstance]

    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer,  # type: ignore[no-untyped-def]  # OpenRLHF's
                      llm_engine, images=None) -> dict[str, Any]:
        if images:
            raise ValueError("agentrl envs are text-only; this sample carries images")
        instance = self.agent_instance_cls()
        tokens = TokenTranscript(hf_tokenizer)
        action_ranges: list[tuple[int, int]] = []
        truncated, done, extra_logs = False, False, {}
        reward = score = 0.0
        try:
            reset = await instance.reset({"observation": prompt, "label": label})
            tokens.start(reset["observation"])
            while not done and max_length - len(tokens.ids) > 0:
                params = deepcopy(sampling_params)
                params.max_tokens = max_length - len(tokens.ids)
                output = (await llm_engine.generate(tokens.ids, params)).outputs[0]
                generated = list(output.token_ids)
                start = len(tokens.ids)
                text = tokens.add_generation(generated, _logprobs(output, generated))
                action_ranges.append((start, start + len(generated)))
                truncated = output.finish_reason == "length"
                step = await instance.step({"observation_text": hf_tokenizer.decode(tokens.ids[:start]),
                                            "action_text": text, "label": label, "sampling_params": params})
                reward += float(step["rewards"])
                score = float(step.get("scores", reward))
                done, extra_logs = bool(step["done"]), step.get("extra_logs", {})
                if not done:
                    tokens.add_observation(step["environment_feedback"])
        finally:
            await instance.close()
        logprobs = tokens.logprobs if sampling_params.logprobs is not None else None
        return {
            "prompt": prompt, "label": label, "images": images, "mm_train_inputs": None,
            "reward": reward, "scores": score,
            "observation_tokens": tokens.ids, "action_ranges": action_ranges, "rollout_log_probs": logprobs,
            "truncated": truncated, "extra_logs": extra_logs,
        }


def _logprobs(output: Any, generated: list[int]) -> list[float] | None:
    """vLLM's sampled-token logprobs (one {id: Logprob} per position), when it returned them."""
    if not getattr(output, "logprobs", None):
        return None
    return [float(position[token].logprob)
            for position, token in zip(output.logprobs, generated, strict=True)]


def agent_executor(env_id: str, *, base_url: str | None = None, token: str | None = None,
                   env_kwargs: Mapping[str, Any] | None = None) -> type[AgentrlAgentExecutor]:
    """The `AgentExecutor` class for an agent file: `env_id` served at `base_url` (None: in the
    rollout actor's own process)."""
    source = EnvSource(env_id, base_url, token, dict(env_kwargs or {}))
    instance = type("AgentInstance", (AgentrlAgentInstance,), {"source": source})
    return type("AgentExecutor", (AgentrlAgentExecutor,), {"agent_instance_cls": instance,
                                                            "__doc__": f"{env_id} for OpenRLHF."})
