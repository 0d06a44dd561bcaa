"""agentrl envs for SkyRL (`skyrl-gym`): a `BaseTextEnv` per episode, registered under the agentrl id.

SkyRL's generator makes one env per trajectory with `skyrl_gym.make(env_class, env_config=...,
extras=row)`, calls `init(prompt)`, `step(model_text)` until `done`, then `close()`. Actions are raw
text, as in agentrl, so a step is one agentrl step:

    register()  # every agentrl id; in each process that makes envs (SkyRL's generator workers)
    env = skyrl_gym.make("agentrl/Flights-v0", env_config={"base_url": "http://127.0.0.1:8000"},
                         extras={"seed": 3, "split": "train"})

`env_config` (SkyRL's per-env config block): `base_url`, `token`, `env_kwargs`; without `base_url`
the env runs in-process. `extras` (the dataset row): `seed`, `split`, `options`, and `max_turns`,
which SkyRL's generator sets and which becomes the env's own `max_turns`. `close()` deletes the
server-side episode.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import skyrl_gym
from omegaconf import DictConfig, OmegaConf
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput, ConversationType

from agentrl.integrations.episode import EnvSource, RowEpisode
from agentrl.registration import ENV_IDS

ENTRY_POINT = "agentrl.integrations.skyrl:AgentrlTextEnv"
CONFIG_KEYS = frozenset({"base_url", "token", "env_kwargs"})


class AgentrlTextEnv(BaseTextEnv):
    """One agentrl episode behind SkyRL's text-env interface."""

    def __init__(self, env_config: Mapping[str, Any] | None = None, extras: Mapping[str, Any] | None = None,
                 *, env_id: str) -> None:
        super().__init__()
        config = _plain(env_config)
        if unknown := set(config) - CONFIG_KEYS:
            raise ValueError(f"unknown env_config keys {sorted(unknown)}; known: {sorted(CONFIG_KEYS)}")
        self.extras = _plain(extras)
        env_kwargs = dict(config.get("env_kwargs") or {})
        if self.extras.get("max_turns") is not None:
            self.max_turns = int(self.extras["max_turns"])
            env_kwargs["max_turns"] = self.max_turns
        source = EnvSource(env_id, config.get("base_url"), config.get("token"), env_kwargs)
        self.episode = RowEpisode(source)

    def init(self, prompt: ConversationType) -> tuple[ConversationType, dict[str, Any]]:
        """Start the row's episode: the prompt's system messages, then the env's task as the user turn."""
        observation = self.episode.start(self.extras)
        system = [m for m in prompt or [] if m.get("role") == "system"]
        return [*system, {"role": "user", "content": observation}], dict(self.episode.info)

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        result = self.episode.step(action)
        done = result.terminated or result.truncated
        observations = [] if done else [{"role": "user", "content": result.observation}]
        return BaseTextEnvStepOutput(  # pyright: ignore[reportCallIssue]  # skyrl's TypedDict is mistyped:
            # it gives `postprocessed_action` a default, which a TypedDict cannot have, so the checker
            # reads the key as required; skyrl's own envs leave it out
            observations=observations, reward=result.reward, done=done, metadata=result.info)

    def get_metrics(self) -> dict[str, Any]:
        return {"turns": self.turns, "episode_reward": self.episode.reward}

    def close(self) -> None:
        self.episode.close()


def _plain(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """A plain dict of SkyRL's config or row (an OmegaConf `DictConfig` does not serialise to JSON)."""
    if isinstance(config, DictConfig):
        return dict(OmegaConf.to_container(config, resolve=True))  # type: ignore[arg-type]  # a DictConfig: a dict
    return dict(config or {})


def register(env_ids: Iterable[str] = ENV_IDS) -> None:
    """Register agentrl ids with skyrl-gym (idempotent); the dataset's `env_class` is the id."""
    for env_id in env_ids:
        if env_id not in skyrl_gym.registry:
            skyrl_gym.register(id=env_id, entry_point=ENTRY_POINT, kwargs={"env_id": env_id})
