"""agentrl envs for verl: an agent loop that plays one agentrl episode per trajectory.

verl's `AgentLoopWorker` builds the loop named by a dataset row's `agent_name` from its registry
(an entry is a hydra config: `_target_` and constructor keywords) and awaits `run`, which returns
an `AgentLoopOutput`. `AgentrlAgentLoop.run` opens the row's episode, generates through verl's
server manager (token ids in, token ids out), sends each reply's text to the env as the action and
appends the env's observation, masked, until the env ends the episode, verl's response budget or
its `max_assistant_turns` runs out. An agent loop, not a verl `BaseTool`: verl makes and releases a
tool per call, and an agentrl episode is one state from reset to the end.

Plug it in with an agent-loop config file (verl loads it in every rollout worker):

    # agentrl_agent.yaml; the row's agent_name is "agentrl_flights"
    - name: agentrl_flights
      _target_: agentrl.integrations.verl.AgentrlAgentLoop
      env_id: agentrl/Flights-v0
      base_url: http://127.0.0.1:8000

    python -m verl.trainer.main_ppo ... \
        actor_rollout_ref.rollout.agent.agent_loop_config_path=agentrl_agent.yaml

or, in one process, `register("agentrl_flights", "agentrl/Flights-v0", base_url=...)`. A row's
`extra_info` picks the episode (`seed`, `split`, `options`); its `raw_prompt`'s system messages
open the conversation, and the env's task is the user turn. The env's reward is `reward_score`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import uuid4

from omegaconf import DictConfig, OmegaConf
from verl.experimental.agent_loop.agent_loop import (  # pyright: ignore[reportMissingImports]  # optional, not installed where the check runs
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    _agent_loop_registry,
)
from verl.experimental.agent_loop.agent_loop import register as verl_register  # pyright: ignore[reportMissingImports]  # optional, not installed where the check runs
from verl.utils.profiler import simple_timer  # pyright: ignore[reportMissingImports]  # optional, not installed where the check runs

from agentrl.integrations.episode import EnvSource
from agentrl.integrations.tokens import TokenEpisode

TARGET = "agentrl.integrations.verl.AgentrlAgentLoop"


class AgentrlAgentLoop(AgentLoopBase):
    """One agentrl episode per trajectory: `response_mask` is 1 on generated ids, 0 on the env's.

    Keywords (an agent-loop config entry): `env_id`, `base_url` (None: the env runs in the
    rollout worker's process), `token`, `env_kwargs`. verl's own keywords pass through.
    """

    def __init__(self, *args: Any, env_id: str, base_url: str | None = None, token: str | None = None,
                 env_kwargs: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        kwargs.pop("name", None)  # the entry's own name, which verl passes along with its keywords
        kwargs.pop("tools", None)  # verl's tool list: the env brings its own tools
        super().__init__(*args, **kwargs)
        self.source = EnvSource(env_id, base_url, token, _plain(env_kwargs))
        self.response_length = int(self.rollout_config.response_length)
        self.max_assistant_turns = self.rollout_config.multi_turn.get("max_assistant_turns")

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        row = kwargs.get("extra_info") or {}
        system = [m for m in kwargs.get("raw_prompt") or [] if m.get("role") == "system"]
        episode = TokenEpisode(self.source, self.tokenizer,
                               chat_template_kwargs=_plain(self.apply_chat_template_kwargs))
        metrics: dict[str, Any] = {}
        request_id = uuid4().hex  # one id per trajectory: verl keeps a trajectory on one server
        try:
            await episode.open(row, system)
            while not episode.done and len(episode.response_mask) < self.response_length \
                    and not (self.max_assistant_turns and episode.turns >= self.max_assistant_turns):
                with simple_timer("generate_sequences", metrics):
                    output = await self.server_manager.generate(
                        request_id=request_id, prompt_ids=episode.ids, sampling_params=sampling_params)
                with simple_timer("tool_calls", metrics):
                    await episode.act(output.token_ids, output.log_probs)
        finally:
            await episode.close()
        logprobs = episode.response_logprobs if sampling_params.get("logprobs") else None
        return AgentLoopOutput(
            prompt_ids=episode.prompt_ids,
            response_ids=episode.response_ids[: self.response_length],
            response_mask=episode.response_mask[: self.response_length],
            response_logprobs=logprobs[: self.response_length] if logprobs is not None else None,
            reward_score=episode.reward,
            num_turns=2 * episode.turns + 1,
            metrics=AgentLoopMetrics(**metrics),
            extra_fields={"turn_scores": [], "tool_rewards": [], "agentrl_done": episode.done},
        )


def _plain(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """A plain dict of a config block (hydra hands the entry's mappings over as `DictConfig`, which
    does not serialise to JSON)."""
    if isinstance(config, DictConfig):
        return dict(OmegaConf.to_container(config, resolve=True))  # type: ignore[arg-type]  # a DictConfig: a dict
    return dict(config or {})


def agent_loop_config(name: str, env_id: str, *, base_url: str | None = None, token: str | None = None,
                      env_kwargs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One entry of an `agent_loop_config_path` file (a YAML list of these) for `env_id`."""
    entry: dict[str, Any] = {"name": name, "_target_": TARGET, "env_id": env_id}
    if base_url is not None:
        entry["base_url"] = base_url
    if token is not None:
        entry["token"] = token
    if env_kwargs:
        entry["env_kwargs"] = dict(env_kwargs)
    return entry


def register(name: str, env_id: str, *, base_url: str | None = None, token: str | None = None,
             env_kwargs: Mapping[str, Any] | None = None) -> None:
    """Register `AgentrlAgentLoop` for `env_id` under `name` in this process's verl registry (what
    verl's `register` decorator does, with the entry's keywords, as a config file's entry has them).
    Ray rollout workers are other processes: there, use a config file (`agent_loop_config`)."""
    verl_register(name)(AgentrlAgentLoop)
    _agent_loop_registry[name] = agent_loop_config(name, env_id, base_url=base_url, token=token,
                                                   env_kwargs=env_kwargs)
