"""Rollout workers: one asyncio task per episode, token-in/token-out, against any env driver.

An env driver is the small async surface a worker needs (reset/step/close). Two implementations:
an in-process Gymnasium env whose sync calls run in a thread, and the async HTTP client of an
agentrl server. While one episode waits on its env, the others keep the generation batch full.
"""

from __future__ import annotations

import asyncio
import os
import time
import traceback
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from agentrl.agent_train.backends import GenerationBackend, derive_seed
from agentrl.agent_train.transcript import Transcript

StepOut = tuple[str, float, bool, bool, dict[str, Any]]


class EnvDriver(Protocol):
    async def reset(self, seed: int) -> tuple[str, dict[str, Any]]: ...

    async def step(self, action: str) -> StepOut: ...

    async def close(self) -> None: ...


_ENV_THREADS: ThreadPoolExecutor | None = None


def _env_threads() -> ThreadPoolExecutor:
    """Env calls get their own pool: asyncio's default one has ~cores+4 threads, too few to
    overlap the waits of dozens of episodes whose envs block on I/O."""
    global _ENV_THREADS
    if _ENV_THREADS is None:
        _ENV_THREADS = ThreadPoolExecutor(max_workers=256, thread_name_prefix="agentrl-env")
    return _ENV_THREADS


class GymDriver:
    """An in-process env from `gym.make`; blocking calls go to a worker thread."""

    def __init__(self, env_id: str, **kwargs: Any) -> None:
        import gymnasium as gym

        import agentrl  # noqa: F401  (registers the ids)

        self.env = gym.make(env_id, **kwargs)

    async def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
        return await asyncio.get_running_loop().run_in_executor(
            _env_threads(), partial(self.env.reset, seed=seed)
        )

    async def step(self, action: str) -> StepOut:
        return await asyncio.get_running_loop().run_in_executor(_env_threads(), self.env.step, action)

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(_env_threads(), self.env.close)


class HttpClientPool:
    """One pooled `agentrl.client.AsyncEnvClient` per event loop, shared by every episode on it."""

    def __init__(self, base_url: str, **client_kwargs: Any) -> None:
        # the server's bearer token, from the same variable `agentrl serve` reads
        client_kwargs.setdefault("token", os.environ.get("AGENTRL_TOKEN") or None)
        self.base_url, self.client_kwargs = base_url, client_kwargs
        self._clients: dict[int, Any] = {}

    def get(self) -> Any:
        from agentrl.client import AsyncEnvClient

        key = id(asyncio.get_running_loop())
        if key not in self._clients:
            self._clients[key] = AsyncEnvClient(self.base_url, **self.client_kwargs)
        return self._clients[key]


class HttpDriver:
    """An episode on an agentrl server (`agentrl serve`), over the shared async HTTP client."""

    def __init__(self, env_id: str, pool: HttpClientPool, **env_kwargs: Any) -> None:
        self.env_id, self.pool, self.env_kwargs = env_id, pool, env_kwargs
        self.episode_id: str | None = None

    async def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
        created = await self.pool.get().create_episode(
            self.env_id, seed=seed, env_kwargs=self.env_kwargs or None
        )
        self.episode_id = created.episode_id
        return created.observation, created.info

    async def step(self, action: str) -> StepOut:
        if self.episode_id is None:
            raise RuntimeError("step before reset")
        return (await self.pool.get().step(self.episode_id, action)).as_tuple()

    async def close(self) -> None:
        if self.episode_id is not None:
            episode, self.episode_id = self.episode_id, None
            await self.pool.get().close_episode(episode)


def driver_factory(env_id: str, env_url: str | None = None, **kwargs: Any) -> Callable[[], EnvDriver]:
    if env_url:
        pool = HttpClientPool(env_url)
        return lambda: HttpDriver(env_id, pool, **kwargs)
    return lambda: GymDriver(env_id, **kwargs)


@dataclass
class Episode:
    seed: int
    transcript: Transcript
    reward: float = 0.0
    success: bool = False
    turns: int = 0
    truncated_by_budget: bool = False
    env_s: float = 0.0
    error: str | None = None  # one line: the exception's type and message
    trace: str | None = None  # the full traceback of `error`, for the run log
    task_id: str | None = None  # the env's `info["task_id"]` at reset, when it names one
    info: dict[str, Any] = field(default_factory=dict)
    # per turn, for step-level credit (`credit.py`): where its generation starts in the transcript,
    # the env's `info["state_hash"]` before it (one more: the state after the last step), its reward
    turn_starts: list[int] = field(default_factory=list)
    state_hashes: list[str | None] = field(default_factory=list)
    step_rewards: list[float] = field(default_factory=list)
    # branch credit: the turn this episode was forked before (None: a root), and a root's forks
    fork_turn: int | None = None
    branches: list[tuple[int, list[Episode]]] = field(default_factory=list)

    @property
    def excluded(self) -> str | None:
        """Why this episode must not be trained on (None when it may)."""
        if self.error:
            return f"error: {self.error}"
        if self.transcript.drift:
            return f"drift: {self.transcript.drift}"
        return None


@dataclass
class RolloutLimits:
    max_new_tokens: int = 128  # per turn
    token_budget: int = 2048  # whole transcript, prompt included
    success_threshold: float = 1.0  # reward at or above which an episode counts as a success


@dataclass
class Rollouts:
    """Everything episodes of one kind (training or evaluation) share: where the env comes from,
    the generator, the tokenizer and the limits. One object instead of the same arguments
    passed through every layer."""

    make_driver: Callable[[], EnvDriver]
    backend: GenerationBackend
    tokenizer: Any
    limits: RolloutLimits = field(default_factory=RolloutLimits)
    concurrency: int = 64  # episodes in flight at once
    system_prompt: str | None = None


BeforeTurn = Callable[[EnvDriver, Episode], Awaitable[None]]


async def play(
    spec: Rollouts,
    driver: EnvDriver,
    episode: Episode,
    info: dict[str, Any],
    sample_seed: int | None,
    before_turn: BeforeTurn | None = None,
) -> None:
    """Turns until the episode ends, from wherever `episode` is (`info`: the env's latest); with
    `sample_seed`, turn t's tokens are sampled with seed (sample_seed, t). `before_turn` sees each
    state before the policy acts in it (branch credit forks there)."""
    transcript, limits = episode.transcript, spec.limits
    while True:
        room = limits.token_budget - len(transcript.ids)
        if room <= 0:
            episode.truncated_by_budget = True
            break
        if before_turn is not None:
            await before_turn(driver, episode)
        turn_seed = None if sample_seed is None else derive_seed(sample_seed, episode.turns)
        episode.turn_starts.append(len(transcript.ids))
        gen = await spec.backend.generate(transcript.ids, min(limits.max_new_tokens, room), turn_seed)
        action = transcript.add_generation(gen.ids, gen.logprobs, gen.version)
        start = time.perf_counter()
        observation, reward, terminated, truncated, info = await driver.step(action)
        episode.env_s += time.perf_counter() - start
        episode.reward += float(reward)
        episode.step_rewards.append(float(reward))
        episode.state_hashes.append(info.get("state_hash"))
        episode.turns += 1
        if terminated or truncated:
            break
        if not transcript.add_env_message(observation):
            break  # drifted: stop here, the episode is excluded from training
    transcript.check()
    episode.info = dict(info)
    episode.success = bool(info.get("success", episode.reward >= limits.success_threshold))


async def run_episode(
    spec: Rollouts, seed: int, sample_seed: int | None = None, before_turn: BeforeTurn | None = None
) -> Episode:
    """One episode (see `play`).

    An exception (env, server, generator) ends this episode with `error` and `trace` set: the
    caller counts it and decides whether the run can go on; it is never trained on."""
    transcript = Transcript(spec.tokenizer)
    episode = Episode(seed=seed, transcript=transcript)
    driver = None
    try:
        driver = await asyncio.get_running_loop().run_in_executor(_env_threads(), spec.make_driver)
        start = time.perf_counter()
        observation, info = await driver.reset(seed)
        episode.env_s += time.perf_counter() - start
        if info.get("task_id") is not None:
            episode.task_id = str(info["task_id"])
        first = [{"role": "user", "content": observation}]
        if spec.system_prompt:
            first.insert(0, {"role": "system", "content": spec.system_prompt})
        transcript.start(first)
        episode.state_hashes.append(info.get("state_hash"))
        await play(spec, driver, episode, info, sample_seed, before_turn)
    except Exception as exc:
        episode.error = f"{type(exc).__name__}: {exc}"
        episode.trace = traceback.format_exc()
    finally:
        if driver is not None:
            try:
                await driver.close()
            except Exception as exc:
                if episode.error is None:
                    episode.error = f"close failed: {type(exc).__name__}: {exc}"
                    episode.trace = traceback.format_exc()
    return episode


async def collect_groups(
    spec: Rollouts,
    seeds: list[int],
    group_size: int,
    sample_seed: int | None = None,
    on_done: Callable[[Episode], Any] | None = None,
) -> list[list[Episode]]:
    """G episodes per seed (same seed: the group shares one world), all running concurrently.

    With `sample_seed`, episode j of env seed s samples with seed (sample_seed, s, j): the
    collected groups are then the same however the episodes interleave. `on_done` sees each
    episode as it ends (a progress bar).
    """
    gate = asyncio.Semaphore(spec.concurrency)

    async def one(seed: int, j: int) -> Episode:
        own = None if sample_seed is None else derive_seed(sample_seed, seed, j)
        async with gate:
            episode = await run_episode(spec, seed, own)
        if on_done is not None:
            on_done(episode)
        return episode

    flat = await asyncio.gather(*(one(s, j) for s in seeds for j in range(group_size)))
    return [list(flat[i * group_size : (i + 1) * group_size]) for i in range(len(seeds))]
