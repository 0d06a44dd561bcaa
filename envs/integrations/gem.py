"""agentrl envs as GEM envs (`gem-llm`), the env interface ROLL's agentic pipeline drives.

GEM makes an env by id (`gem.make(env_id, **kwargs)`), resets it with a seed and steps it with the
model's text: `reset(seed) -> (observation, info)`, `step(action) -> (observation, reward,
terminated, truncated, info)`, Gymnasium's shapes with text on both sides. `register()` puts every
agentrl id in GEM's registry:

    register()  # in each process that makes envs (ROLL's env managers)
    env = gem.make("agentrl/Flights-v0", base_url="http://127.0.0.1:8000", split="train")
    observation, info = env.reset(seed=3)

A group (ROLL's GRPO or GiGPO) is envs made with the same keywords and reset with the same seed:
agentrl envs are deterministic, so they start from the same task and reach the same state after the
same actions, which GiGPO's anchor states need. `spawn(same_state=True)` replays the episode's
actions on a new episode for the same reason. An episode is deleted on the server when it ends, at
the next `reset` and at `close`. Text in, text out: the trainer (ROLL) tokenises and masks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import gem
from gem.envs.registration import ENV_REGISTRY  # pyright: ignore[reportMissingImports]  # pyright reads `gem` as this module (a sibling); GEM is not installed here

from agentrl.integrations.episode import EnvSource, RowEpisode
from agentrl.registration import ENV_IDS

ENTRY_POINT = "agentrl.integrations.gem:AgentrlGemEnv"


class AgentrlGemEnv(gem.Env):  # pyright: ignore[reportAttributeAccessIssue]  # pyright reads `gem` as this module (a sibling); GEM is not installed here
    """One agentrl env id behind GEM's `Env`.

    Keywords: `agentrl_env`, the agentrl id (GEM keeps `env_id` for its own); `base_url` (None:
    the env runs in this process), `token`, `env_kwargs`;
    `split` and `options`, the reset options of every episode; `seed`, the seed of a `reset()`
    without one (GEM's `make_vec` passes `seed + index`).
    """

    def __init__(self, agentrl_env: str, *, base_url: str | None = None, token: str | None = None,
                 env_kwargs: Mapping[str, Any] | None = None, split: str | None = None,
                 options: Mapping[str, Any] | None = None, seed: int | None = None) -> None:
        super().__init__()
        self.config = {"agentrl_env": agentrl_env, "base_url": base_url, "token": token,
                       "env_kwargs": dict(env_kwargs or {}), "split": split, "options": dict(options or {}),
                       "seed": seed}
        self.episode = RowEpisode(EnvSource(agentrl_env, base_url, token, dict(env_kwargs or {})))
        self.default_seed = seed
        self.seed: int | None = None
        self.actions: list[str] = []
        self.started = False

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start the episode of `seed` (or the default one); the previous one is deleted first."""
        self.episode.release()
        self.seed = self.default_seed if seed is None else seed
        self.actions, self.started = [], True
        row = {"seed": self.seed, "split": self.config["split"], "options": self.config["options"]}
        observation = self.episode.start(row)
        return observation, dict(self.episode.info)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        result = self.episode.step(action)
        self.actions.append(action)
        if self.episode.done:
            self.episode.release()
        return result.observation, result.reward, result.terminated, result.truncated, result.info

    def spawn(self, same_state: bool = False, **kwargs: Any) -> AgentrlGemEnv:
        """A new env with this one's keywords (`kwargs` override them); with `same_state`, reset to
        this episode's seed and replaying its actions, which puts a deterministic env in the same state."""
        child = AgentrlGemEnv(**{**self.config, **kwargs})
        if same_state:
            if not self.started:
                raise ValueError("this env has no episode to copy: reset it first")
            child.reset(seed=self.seed)
            for action in self.actions:
                child.step(action)
        return child

    def close(self) -> None:
        self.episode.close()


def register(env_ids: Iterable[str] = ENV_IDS) -> None:
    """Register agentrl ids with GEM (idempotent); `gem.make(id, ...)` then builds `AgentrlGemEnv`."""
    for env_id in env_ids:
        if env_id not in ENV_REGISTRY:
            gem.register(env_id, ENTRY_POINT, agentrl_env=env_id)  # pyright: ignore[reportCallIssue]  # pyright reads `gem` as this module (a sibling); GEM is not installed here
