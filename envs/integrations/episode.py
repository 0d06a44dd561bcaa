"""What every framework adapter does with an agentrl env: start an episode from a dataset row, step
it with the model's text, keep its reward, and end the server-side episode when the rollout ends.

`Episode` is synchronous (TRL and SkyRL call envs from plain threads); `AsyncEpisode` runs in an
event loop (verifiers). Both drive a local env or a served one: locally a `gym.make` env, remotely
the same id on `agentrl serve`, through `RemoteEnv` (sync, over one client per server and process)
or `AsyncEnvClient` (async).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

import agentrl  # noqa: F401  (registers the env ids)
from agentrl.client import AsyncEnvClient, EnvClient, RemoteEnv
from agentrl.core import EpisodeOverError, StepResult
from agentrl.core.tools import TOOL_RESPONSE

SPLITS = ("train", "test")
# ToolEnv's first observation is the task, then this header and the tool listing (agentrl.core.base)
TOOLS_HEADER = "\n\n# Tools\n"


@dataclass(frozen=True)
class EpisodeStart:
    """Which episode a dataset row asks for: `seed`, `split` ("train"/"test") and reset `options`."""

    seed: int | None = None
    split: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> EpisodeStart:
        """Read the row's `seed`, `split` and `options`; other columns (the prompt...) are ignored."""
        seed, split, options = row.get("seed"), row.get("split"), row.get("options") or {}
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ValueError(f"a row's seed must be a non-negative int, got {seed!r}")
        if split is not None and split not in SPLITS:
            raise ValueError(f"a row's split must be one of {SPLITS}, got {split!r}")
        if not isinstance(options, Mapping):
            raise ValueError(f"a row's options must be a mapping, got {type(options).__name__}")
        return cls(seed, split, dict(options))

    def reset_options(self) -> dict[str, Any] | None:
        """`options` for `env.reset`: the row's, with its split (COMMON contract: envs take `split`)."""
        options = dict(self.options)
        if self.split is not None:
            options["split"] = self.split
        return options or None


@dataclass(frozen=True)
class EnvSource:
    """An agentrl env id, built in-process (`base_url=None`) or served by `agentrl serve` at `base_url`."""

    env_id: str
    base_url: str | None = None
    token: str | None = None
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def make(self) -> gym.Env:
        if self.base_url is None:
            return gym.make(self.env_id, **self.env_kwargs)
        return gym.make(self.env_id, base_url=self.base_url, client=_shared_client(self.base_url, self.token),
                        **self.env_kwargs)

    def async_client(self) -> AsyncEnvClient:
        if self.base_url is None:
            raise ValueError("an in-process env has no server to connect to")
        return AsyncEnvClient(self.base_url, token=self.token)


_CLIENTS: dict[tuple[str, str | None], EnvClient] = {}
_CLIENTS_LOCK = threading.Lock()


def _shared_client(base_url: str, token: str | None) -> EnvClient:
    """One pooled sync client per server and process: frameworks make an env per rollout, and a
    connection pool per env would open a connection per rollout. Lives as long as the process."""
    with _CLIENTS_LOCK:
        client = _CLIENTS.get((base_url, token))
        if client is None:
            client = _CLIENTS[(base_url, token)] = EnvClient(base_url, token=token)
        return client


class Episode:
    """One env, played episode after episode: `start` from a row, `step`, then `release`.

    `reward` is the sum of what the env paid since `start`; an episode the framework stopped before
    the env ended it keeps what it was paid so far. `release` deletes the server-side episode (a
    local env has nothing to free between episodes); `start` opens a new one.
    """

    def __init__(self, source: EnvSource) -> None:
        self.source = source
        self.env = source.make()
        self._remote = isinstance(self.env.unwrapped, RemoteEnv)
        self.reward = 0.0
        self.done = True
        self.info: dict[str, Any] = {}

    def start(self, row: Mapping[str, Any]) -> str:
        """Reset to the row's episode; returns the first observation (`info` is kept on `self.info`)."""
        begin = EpisodeStart.from_row(row)
        observation, self.info = self.env.reset(seed=begin.seed, options=begin.reset_options())
        self.reward, self.done = 0.0, False
        return observation

    def step(self, action: str) -> StepResult:
        if self.done:
            raise EpisodeOverError("the episode is over; the env ends it on `finish` or at max_turns")
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.reward += float(reward)
        self.done = terminated or truncated
        return StepResult(observation, float(reward), terminated, truncated, info)

    def release(self) -> None:
        """End the server-side episode now (no-op in-process); the next `start` opens a new one."""
        self.done = True
        if self._remote:
            self.env.close()  # the shared client stays open: RemoteEnv only closes a client it owns

    def close(self) -> None:
        self.done = True
        self.env.close()


class AsyncEpisode:
    """`Episode` for an event loop: a served env through `AsyncEnvClient`, a local one in a thread."""

    def __init__(self, source: EnvSource, client: AsyncEnvClient | None = None) -> None:
        if (client is None) != (source.base_url is None):
            raise ValueError("pass an AsyncEnvClient exactly when the env is served")
        self.source = source
        self.client = client
        self.owns_client = False  # `owning` made the client: `close` closes it too
        self.env: gym.Env | None = None
        self.episode_id: str | None = None
        self.reward = 0.0
        self.done = True
        self.info: dict[str, Any] = {}

    @classmethod
    def owning(cls, source: EnvSource) -> AsyncEpisode:
        """An episode with a client of its own where `source` is served (one per framework rollout
        object, where nothing else holds a client); `close` closes that client after the episode."""
        episode = cls(source, source.async_client() if source.base_url is not None else None)
        episode.owns_client = episode.client is not None
        return episode

    async def start(self, row: Mapping[str, Any]) -> str:
        begin = EpisodeStart.from_row(row)
        if self.client is not None:
            created = await self.client.create_episode(self.source.env_id, seed=begin.seed,
                                                       options=begin.reset_options(),
                                                       env_kwargs=dict(self.source.env_kwargs) or None)
            self.episode_id, observation, self.info = created.episode_id, created.observation, created.info
        else:
            self.env = await asyncio.to_thread(self.source.make)
            observation, self.info = await asyncio.to_thread(
                self.env.reset, seed=begin.seed, options=begin.reset_options())
        self.reward, self.done = 0.0, False
        return observation

    async def step(self, action: str) -> StepResult:
        if self.done:
            raise EpisodeOverError("the episode is over; the env ends it on `finish` or at max_turns")
        if self.client is not None:
            assert self.episode_id is not None
            result = await self.client.step(self.episode_id, action)
        else:
            assert self.env is not None
            result = StepResult(*await asyncio.to_thread(self.env.step, action))
        self.reward += float(result.reward)
        self.done = result.terminated or result.truncated
        return result

    async def close(self) -> None:
        """Delete the server-side episode, or close the local env, then the client if this episode
        owns it; safe to call twice."""
        self.done = True
        try:
            if self.episode_id is not None and self.client is not None:
                episode_id, self.episode_id = self.episode_id, None
                await self.client.close_episode(episode_id)
            if self.env is not None:
                env, self.env = self.env, None
                await asyncio.to_thread(env.close)
        finally:
            if self.owns_client and self.client is not None:
                client, self.client = self.client, None
                await client.aclose()


def task_text(observation: str) -> str:
    """The first observation without the env's own tool listing, for frameworks whose chat template
    shows the tools itself (TRL); an observation without the listing comes back whole."""
    head, found, _ = observation.partition(TOOLS_HEADER)
    return head if found else observation


def tool_result(observation: str) -> str:
    """The body of the last `<tool_response>` in an observation, or the observation itself."""
    found = TOOL_RESPONSE.findall(observation)
    return found[-1] if found else observation
