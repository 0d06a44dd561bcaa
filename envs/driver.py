"""One episode driver: the loop that plays an episode, in-process or over HTTP, sync or async.

Every caller that plays episodes (the demo, agent-train's rollouts, the framework adapters, the
examples) plays them here, so "reset, then policy -> action -> step until the episode ends" is
written once. The pieces:

- `EnvSource`: an env id, built in-process (`gym.make`) or served by `agentrl serve` at `base_url`.
- `Episode` (sync, over any Gymnasium env, a `RemoteEnv` included) and `AsyncEpisode` (an event
  loop's: a served env through `AsyncEnvClient`, a local one on a worker thread): `begin` an
  episode, `step` it, read its `record`, `close` it. Twins over one core, `Outcome`, which keeps
  what the driver saw (the first observation and info, the reward, turns, end flags, the last
  info, the time spent waiting on the env) and checks the order of calls.
- `play` and `aplay`: the loop itself. A policy maps (observation, info) to the next action, or
  to None when it has nothing more to say (a token budget spent); then the episode stops there.
  `acontinue` is `aplay`'s loop alone: it plays on an episode already under way (a fork of one,
  `AsyncEpisode.fork`).

What happened in the episode, step by step, is the env's trajectory record (`record()`,
`agentrl.core.trajectory`), not a list kept here: the driver keeps totals only.
"""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import gymnasium as gym

from agentrl.core import EpisodeOverError, StepResult

if TYPE_CHECKING:
    from typing_extensions import Self

    from agentrl.client import AsyncEnvClient, EnvClient

Policy = Callable[[str, dict[str, Any]], "str | None"]
AsyncPolicy = Callable[[str, dict[str, Any]], Awaitable["str | None"]]
T = TypeVar("T")


@dataclass
class Outcome:
    """How one episode went, as its driver saw it (the steps themselves are the env's record)."""

    seed: int | None
    options: dict[str, Any] | None
    observation: str  # the first observation
    info: dict[str, Any]  # the reset's info
    reward: float = 0.0  # the sum of what the env paid
    turns: int = 0
    terminated: bool = False
    truncated: bool = False
    last_observation: str = ""  # the last step's observation (the first before a step)
    last_info: dict[str, Any] = field(default_factory=dict)  # the last step's info (the reset's before one)
    last_reward: float = 0.0  # what the last step paid (0 before a step)
    env_s: float = 0.0  # seconds spent waiting on the env's reset and steps

    def __post_init__(self) -> None:
        self.last_observation, self.last_info = self.observation, self.info

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    def add(self, result: StepResult, seconds: float) -> StepResult:
        self.reward += float(result.reward)
        self.turns += 1
        self.terminated, self.truncated = bool(result.terminated), bool(result.truncated)
        self.last_observation, self.last_info = result.observation, result.info
        self.last_reward = float(result.reward)
        self.env_s += seconds
        return result


class _EpisodeCore:
    """What `Episode` and `AsyncEpisode` share: the outcome so far and the check before a step."""

    outcome: Outcome | None = None
    forced_done = True  # no episode yet, or it was released: no step may follow

    @property
    def done(self) -> bool:
        return self.forced_done or self.outcome is None or self.outcome.done

    @property
    def reward(self) -> float:
        return 0.0 if self.outcome is None else self.outcome.reward

    @property
    def info(self) -> dict[str, Any]:
        """The info of the episode's reset (the task, the tools), as frameworks read it."""
        return {} if self.outcome is None else self.outcome.info

    def _began(self, seed: int | None, options: dict[str, Any] | None, observation: str,
               info: dict[str, Any], seconds: float) -> str:
        self.outcome = Outcome(seed, options, observation, info, env_s=seconds)
        self.forced_done = False
        return observation

    def _check_step(self) -> Outcome:
        if self.done or self.outcome is None:
            raise EpisodeOverError("the episode is over; the env ends it on `finish` or at max_turns")
        return self.outcome


@dataclass(frozen=True)
class EnvSource:
    """An agentrl env id, built in-process (`base_url=None`) or served by `agentrl serve` at `base_url`."""

    env_id: str
    base_url: str | None = None
    token: str | None = None
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def make(self) -> gym.Env:
        import agentrl  # noqa: F401  (registers the env ids)

        if self.base_url is None:
            return gym.make(self.env_id, **self.env_kwargs)
        return gym.make(self.env_id, base_url=self.base_url, client=shared_client(self.base_url, self.token),
                        **self.env_kwargs)

    def async_client(self) -> AsyncEnvClient:
        if self.base_url is None:
            raise ValueError("an in-process env has no server to connect to")
        from agentrl.client import AsyncEnvClient

        return AsyncEnvClient(self.base_url, token=self.token)


_CLIENTS: dict[tuple[str, str | None], EnvClient] = {}
_CLIENTS_LOCK = threading.Lock()


def shared_client(base_url: str, token: str | None) -> EnvClient:
    """One pooled sync client per server and process: frameworks make an env per rollout, and a
    connection pool per env would open a connection per rollout. Lives as long as the process."""
    from agentrl.client import EnvClient

    with _CLIENTS_LOCK:
        client = _CLIENTS.get((base_url, token))
        if client is None:
            client = _CLIENTS[(base_url, token)] = EnvClient(base_url, token=token)
        return client


_ENV_THREADS: ThreadPoolExecutor | None = None
_ENV_THREADS_LOCK = threading.Lock()


def env_threads() -> ThreadPoolExecutor:
    """The threads in-process envs of `AsyncEpisode` run on: asyncio's default pool has ~cores+4
    threads, too few to overlap the waits of dozens of episodes whose envs block on I/O."""
    global _ENV_THREADS
    with _ENV_THREADS_LOCK:
        if _ENV_THREADS is None:
            _ENV_THREADS = ThreadPoolExecutor(max_workers=256, thread_name_prefix="agentrl-env")
        return _ENV_THREADS


async def _in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(env_threads(), partial(fn, *args, **kwargs))


class Episode(_EpisodeCore):
    """Episodes of one Gymnasium env (in-process, or a `RemoteEnv` of a server): `begin`, `step`
    until `done`, `record`; then `begin` again, or `close`.

    `reward` is the sum of what the env paid since `begin`; an episode stopped before the env
    ended it keeps what it was paid so far.
    """

    def __init__(self, env: gym.Env) -> None:
        self.env = env

    @property
    def remote(self) -> bool:
        from agentrl.client import RemoteEnv

        return isinstance(self.env.unwrapped, RemoteEnv)

    def begin(self, seed: int | None = None, options: dict[str, Any] | None = None) -> str:
        """Reset to a new episode; returns the first observation (its info is `self.info`)."""
        start = time.perf_counter()
        observation, info = self.env.reset(seed=seed, options=options)
        return self._began(seed, options, observation, info, time.perf_counter() - start)

    def step(self, action: str) -> StepResult:
        outcome = self._check_step()
        start = time.perf_counter()
        result = StepResult.of(self.env.step(action))
        return outcome.add(result, time.perf_counter() - start)

    def record(self) -> dict[str, Any]:
        """The episode's trajectory record (`agentrl.trajectory/1`), from the env or its server."""
        return self.env.unwrapped.trajectory()  # type: ignore[attr-defined]  # TextEnv and RemoteEnv have it

    def close(self) -> None:
        self.forced_done = True
        self.env.close()


class AsyncEpisode(_EpisodeCore):
    """`Episode` for an event loop: a served env through `AsyncEnvClient` (one server-side episode
    per `begin`), a local one built per `begin` and run on a worker thread (`env_threads`)."""

    def __init__(self, source: EnvSource, client: AsyncEnvClient | None = None) -> None:
        if (client is None) != (source.base_url is None):
            raise ValueError("pass an AsyncEnvClient exactly when the env is served")
        self.source = source
        self.client = client
        self.owns_client = False  # `owning` made the client: `close` closes it too
        self.env: gym.Env | None = None
        self.episode_id: str | None = None

    @classmethod
    def owning(cls, source: EnvSource) -> Self:
        """An episode with a client of its own where `source` is served (one per framework rollout
        object, where nothing else holds a client); `close` closes that client after the episode."""
        episode = cls(source, source.async_client() if source.base_url is not None else None)
        episode.owns_client = episode.client is not None
        return episode

    async def begin(self, seed: int | None = None, options: dict[str, Any] | None = None) -> str:
        """Open a new episode; returns the first observation (its info is `self.info`)."""
        if self.client is not None:
            start = time.perf_counter()
            created = await self.client.create_episode(self.source.env_id, seed=seed, options=options,
                                                       env_kwargs=dict(self.source.env_kwargs) or None)
            self.episode_id, observation, info = created.episode_id, created.observation, created.info
        else:
            if self.env is None:
                self.env = await _in_thread(self.source.make)
            start = time.perf_counter()
            observation, info = await _in_thread(self.env.reset, seed=seed, options=options)
        return self._began(seed, options, observation, info, time.perf_counter() - start)

    async def step(self, action: str) -> StepResult:
        outcome = self._check_step()
        start = time.perf_counter()
        if self.client is not None:
            assert self.episode_id is not None
            result = await self.client.step(self.episode_id, action)
        else:
            assert self.env is not None
            result = StepResult.of(await _in_thread(self.env.step, action))
        return outcome.add(result, time.perf_counter() - start)

    async def fork(self, n: int = 1) -> list[AsyncEpisode]:
        """n episodes in this one's state now, each to be played on (`acontinue`) and closed on its
        own: over HTTP the server's fork route, in-process the env's own `fork`. Their outcomes
        start as a copy of this one's (what was paid and seen so far)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive integer, not {n!r}")
        outcome = self._check_step()
        children = [AsyncEpisode(self.source, self.client) for _ in range(n)]
        if self.client is not None:
            assert self.episode_id is not None
            forked = await self.client.fork_episode(self.episode_id, n)
            for child, made in zip(children, forked, strict=True):
                child.episode_id = made.episode_id
        else:
            assert self.env is not None
            env = self.env.unwrapped
            fork = getattr(env, "fork", None)
            if not callable(fork):
                raise TypeError(f"{type(env).__name__} cannot fork: it has no fork(n) method")
            forked_envs: list[Any] = await _in_thread(fork, n)  # type: ignore[assignment]  # TextEnv.fork's list
            for child, forked_env in zip(children, forked_envs, strict=True):
                child.env = forked_env
        for child in children:
            child.outcome, child.forced_done = copy.deepcopy(outcome), False
        return children

    async def record(self) -> dict[str, Any]:
        """The episode's trajectory record (`agentrl.trajectory/1`), from its server or its env."""
        if self.client is not None:
            if self.episode_id is None:
                raise EpisodeOverError("no episode to record: call begin() first")
            return await self.client.trajectory(self.episode_id)
        if self.env is None:
            raise EpisodeOverError("no episode to record: call begin() first")
        return await _in_thread(self.env.unwrapped.trajectory)  # type: ignore[attr-defined]  # as above

    async def close(self) -> None:
        """Delete the server-side episode, or close the local env, then the client if this episode
        owns it; safe to call twice."""
        self.forced_done = True
        try:
            if self.episode_id is not None and self.client is not None:
                episode_id, self.episode_id = self.episode_id, None
                await self.client.close_episode(episode_id)
            if self.env is not None:
                env, self.env = self.env, None
                await _in_thread(env.close)
        finally:
            if self.owns_client and self.client is not None:
                client, self.client = self.client, None
                await client.aclose()


def play(episode: Episode, policy: Policy, seed: int | None = None,
         options: dict[str, Any] | None = None) -> Outcome:
    """Play one episode: reset, then the policy's actions until the env ends the episode or the
    policy returns None. The policy sees each observation with its step's info (the reset's first)."""
    observation = episode.begin(seed, options)
    info = episode.info
    while not episode.done:
        action = policy(observation, info)
        if action is None:
            break
        observation, info = _seen(episode.step(action))
    assert episode.outcome is not None
    return episode.outcome


async def aplay(episode: AsyncEpisode, policy: AsyncPolicy, seed: int | None = None,
                options: dict[str, Any] | None = None) -> Outcome:
    """`play` for an event loop, with an async policy (a model behind an inference server)."""
    await episode.begin(seed, options)
    return await acontinue(episode, policy)


async def acontinue(episode: AsyncEpisode, policy: AsyncPolicy) -> Outcome:
    """`aplay` on an episode already under way (begun, or a fork): the policy first sees its latest
    observation and info, then plays until the env ends the episode or the policy returns None."""
    if episode.outcome is None:
        raise EpisodeOverError("no episode to play on: call begin() first")
    observation, info = episode.outcome.last_observation, episode.outcome.last_info
    while not episode.done:
        action = await policy(observation, info)
        if action is None:
            break
        observation, info = _seen(await episode.step(action))
    assert episode.outcome is not None
    return episode.outcome


def _seen(result: StepResult) -> tuple[str, dict[str, Any]]:
    return result.observation, result.info
