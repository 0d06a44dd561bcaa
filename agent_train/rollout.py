"""Rollout workers: one asyncio task per episode, token-in/token-out, in-process or over HTTP.

Each episode is played by the episode driver (`agentrl.driver.aplay` over an `AsyncEpisode`: an
in-process Gymnasium env whose sync calls run in a thread, or the async HTTP client of an agentrl
server); the policy is the model, token by token (`TokenPolicy`). While one episode waits on its
env, the others keep the generation batch full.
"""

from __future__ import annotations

import asyncio
import os
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agentrl.agent_train.backends import GenerationBackend, derive_seed
from agentrl.agent_train.transcript import Transcript
from agentrl.driver import AsyncEpisode, EnvSource, Outcome, acontinue, aplay


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


def driver_factory(env_id: str, env_url: str | None = None, **kwargs: Any) -> Callable[[], AsyncEpisode]:
    """Where a run's episodes come from: an `AsyncEpisode` per episode, of `env_id` built in-process
    (`gym.make(env_id, **kwargs)`, on a worker thread) or served at `env_url` (one pooled client
    per event loop). Called on the event loop that plays the episode."""
    if env_url:
        pool = HttpClientPool(env_url)
        source = EnvSource(env_id, env_url, pool.client_kwargs["token"], kwargs)
        return lambda: AsyncEpisode(source, pool.get())
    local = EnvSource(env_id, None, None, kwargs)
    return lambda: AsyncEpisode(local)


@dataclass
class RolloutEpisode:
    """One episode as a training sample: its token transcript, what it was paid, and what credit
    assignment needs of it (turn starts, state hashes, forks)."""

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
    branches: list[tuple[int, list[RolloutEpisode]]] = field(default_factory=list)

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

    make_driver: Callable[[], AsyncEpisode]  # one per episode (`driver_factory`)
    backend: GenerationBackend
    tokenizer: Any
    limits: RolloutLimits = field(default_factory=RolloutLimits)
    concurrency: int = 64  # episodes in flight at once
    system_prompt: str | None = None


BeforeTurn = Callable[[AsyncEpisode, RolloutEpisode], Awaitable[None]]


class TokenPolicy:
    """The model as the driver's policy: the env's text goes into the transcript as the chat
    template renders it, the model's sampled tokens come out as the action. It stops the episode
    (returns None) when the token budget is spent or the transcript drifted.

    Per turn it records on `episode` what step-level credit needs: the state hash each observation
    came with (`info["state_hash"]`), the reward of the step that led there (read from `env`'s
    outcome) and where the turn's generation starts. `before_turn` sees each state before the
    model acts in it (branch credit forks `env` there). A policy given an episode whose transcript
    is not empty plays on a fork of it: that transcript already ends with the observation it is
    first called with, whose step is already recorded."""

    def __init__(self, spec: Rollouts, episode: RolloutEpisode, sample_seed: int | None, env: AsyncEpisode,
                 before_turn: BeforeTurn | None = None) -> None:
        self.spec, self.episode, self.sample_seed = spec, episode, sample_seed
        self.env, self.before_turn = env, before_turn
        self.turns = episode.turns  # a fork's turn seeds go on from where it was forked
        self._resumed = bool(episode.transcript.ids)

    async def __call__(self, observation: str, info: dict[str, Any]) -> str | None:
        transcript, limits = self.episode.transcript, self.spec.limits
        if self._resumed:
            self._resumed = False
        else:
            self.record(info)
            if not transcript.ids:  # the first observation: the prompt
                first = [{"role": "user", "content": observation}]
                if self.spec.system_prompt:
                    first.insert(0, {"role": "system", "content": self.spec.system_prompt})
                transcript.start(first)
            elif not transcript.add_env_message(observation):
                return None  # drifted: stop here, the episode is excluded from training
        room = limits.token_budget - len(transcript.ids)
        if room <= 0:
            self.episode.truncated_by_budget = True
            return None
        if self.before_turn is not None:
            await self.before_turn(self.env, self.episode)
        turn_seed = None if self.sample_seed is None else derive_seed(self.sample_seed, self.turns)
        self.episode.turn_starts.append(len(transcript.ids))
        gen = await self.spec.backend.generate(transcript.ids, min(limits.max_new_tokens, room), turn_seed)
        self.turns += 1
        return transcript.add_generation(gen.ids, gen.logprobs, gen.version)

    def record(self, info: dict[str, Any]) -> None:
        """The state hash of the observation `info` came with, and, after a step, what it paid."""
        if self.env.outcome is not None and len(self.episode.step_rewards) < self.env.outcome.turns:
            self.episode.step_rewards.append(self.env.outcome.last_reward)
        self.episode.state_hashes.append(info.get("state_hash"))

    def finish(self, outcome: Outcome) -> None:
        """After the episode: the last step's record where the env ended the episode (the policy
        was not called after it), the transcript's check, the last info and success."""
        if len(self.episode.step_rewards) < outcome.turns:
            self.record(outcome.last_info)
        self.episode.transcript.check()
        self.episode.info = dict(outcome.last_info)
        passed = outcome.reward >= self.spec.limits.success_threshold
        self.episode.success = bool(outcome.last_info.get("success", passed))


async def run_episode(
    spec: Rollouts, seed: int, sample_seed: int | None = None, before_turn: BeforeTurn | None = None
) -> RolloutEpisode:
    """One episode; with `sample_seed`, turn t's tokens are sampled with seed (sample_seed, t);
    `before_turn` sees each state before the model acts in it (see `TokenPolicy`).

    An exception (env, server, generator) ends this episode with `error` and `trace` set: the
    caller counts it and decides whether the run can go on; it is never trained on."""
    episode = RolloutEpisode(seed=seed, transcript=Transcript(spec.tokenizer))
    env = None
    try:
        env = spec.make_driver()
        policy = TokenPolicy(spec, episode, sample_seed, env, before_turn)
        policy.finish(await aplay(env, policy, seed))
    except Exception as exc:
        episode.error = f"{type(exc).__name__}: {exc}"
        episode.trace = traceback.format_exc()
    finally:
        if env is not None:
            await _settle(spec, episode, env)
    return episode


async def continue_fork(
    spec: Rollouts, env: AsyncEpisode, episode: RolloutEpisode, sample_seed: int | None
) -> RolloutEpisode:
    """A fork of an episode (`AsyncEpisode.fork`) played on to its end from `episode`, its copy of
    the forked episode's record (see `TokenPolicy`); then closed, whatever happens."""
    try:
        policy = TokenPolicy(spec, episode, sample_seed, env)
        policy.finish(await acontinue(env, policy))
    except Exception as exc:
        episode.error = f"{type(exc).__name__}: {exc}"
        episode.trace = traceback.format_exc()
    finally:
        await _settle(spec, episode, env)
    return episode


async def _settle(spec: Rollouts, episode: RolloutEpisode, env: AsyncEpisode) -> None:
    """Take what the env paid and said (also when a step failed) into `episode`, let the generator
    forget the episode's keys and values (a backend that keeps them has `release`), then close the env."""
    release = getattr(spec.backend, "release", None)
    if release is not None:
        release(episode.transcript.ids)
    seen = env.outcome
    if seen is not None:
        episode.reward, episode.turns, episode.env_s = seen.reward, seen.turns, seen.env_s
        if seen.info.get("task_id") is not None:
            episode.task_id = str(seen.info["task_id"])
    try:
        await env.close()
    except Exception as exc:
        if episode.error is None:
            episode.error = f"close failed: {type(exc).__name__}: {exc}"
            episode.trace = traceback.format_exc()


async def collect_groups(
    spec: Rollouts,
    seeds: list[int],
    group_size: int,
    sample_seed: int | None = None,
    on_done: Callable[[RolloutEpisode], Any] | None = None,
) -> list[list[RolloutEpisode]]:
    """G episodes per seed (same seed: the group shares one world), all running concurrently.

    With `sample_seed`, episode j of env seed s samples with seed (sample_seed, s, j): the
    collected groups are then the same however the episodes interleave. `on_done` sees each
    episode as it ends (a progress bar).
    """
    gate = asyncio.Semaphore(spec.concurrency)

    async def one(seed: int, j: int) -> RolloutEpisode:
        own = None if sample_seed is None else derive_seed(sample_seed, seed, j)
        async with gate:
            episode = await run_episode(spec, seed, own)
        if on_done is not None:
            on_done(episode)
        return episode

    flat = await asyncio.gather(*(one(s, j) for s in seeds for j in range(group_size)))
    return [list(flat[i * group_size : (i + 1) * group_size]) for i in range(len(seeds))]
