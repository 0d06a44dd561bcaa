"""The episode registry: every live episode, its env instance, its lock and its lifetime.

Env code is blocking, so it runs off the event loop's own work (see `dispatch.py`); an
`asyncio.Lock` per episode keeps one episode's steps in order while different episodes step at
the same time. Results are encoded to JSON where the step ran (`agentrl.protocol.encode_step`),
so the event loop only moves bytes.

Every step, whichever way it came (`POST .../step`, `POST /v1/step`, a `/v1/ws` frame, OpenEnv's
`/ws`), is run by `run_steps`: each at once on the event loop where its env's steps are measured
cheap and its episode is idle (`step_now`), else in a task under its episode's lock
(`step_later`). Each step's outcome is its `StepResult` and that result's bytes, or the
`ApiError` it is answered with; every entry turns that outcome into its own answer. Creates,
resets and closes run the same way: each operation is written once (`agentrl.server.operations`)
and run by one runner, at once on the loop (`now`) or in a task (`later`); forks, trajectory records
and renderings always in a task.

An episode id names the server process holding the episode (`<holder>.<random hex>`), so that
whatever spreads episodes over several processes can route each request by its id alone. An episode
that ended stays ended: the server remembers it (`agentrl.server.ended`, on disk with a state
directory) and tells its client so, and every create answers the TTLs, by which a cluster client
knows an episode that may have ended from one whose server was lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import time
from collections.abc import Container, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import gymnasium as gym

from agentrl.protocol import (
    BatchItem,
    CloseCall,
    CreateCall,
    ErrorCode,
    ResetCall,
    dumps,
    encode_closed,
    encode_item,
)
from agentrl.registration import ENV_ENTRY_POINTS, load_env_class
from agentrl.server.call_answers import ENDED, ApiError, Remembered, ended, gone
from agentrl.server.config import ServerConfig
from agentrl.server.dispatch import PackedExecutor, run_in_order
from agentrl.server.ended import KEEP_PAST_AGE_S, Ended, EndedEpisodes, memory_path
from agentrl.server.metrics import Metrics
from agentrl.server.operations import Close, Create, Operation, Render, Reset, Step, Stepped
from agentrl.server.owners import CALLER, key_digest
from agentrl.server.transcript import RecentlyClosed, WatchTranscript

log = logging.getLogger("agentrl.server")
StepOutcome = Stepped | ApiError  # what a step is answered with
T = TypeVar("T")


@dataclass(eq=False)
class LiveEpisode:
    """An episode the server holds now: its env, its lock, the answers kept for request ids, and its
    transcript for watchers (what stays after its close is a `ClosedEpisode`)."""

    episode_id: str
    env_id: str
    env: gym.Env
    seed: int | None
    # request_id -> a step's `Stepped`; ("reset", request_id) -> a reset's first observation and info
    results: Remembered
    created: float = field(default_factory=time.monotonic)
    last_used: float = field(default_factory=time.monotonic)
    turns: int = 0
    over: bool = False
    closed: bool = False
    end_reason: str | None = None  # why it was closed (`EpisodeRegistry.close`'s reason)
    owner: str | None = None  # the client key it was made with (`agentrl.server.owners`)
    # the server's TTLs, as its create answers them (one dict, `EpisodeRegistry.lifetimes`, shared)
    lifetimes: dict[str, float] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    step_kind: str = field(init=False)  # the dispatcher's name for this env's steps, made once
    transcript: WatchTranscript = field(default_factory=WatchTranscript)  # GET .../transcript, /ui

    def __post_init__(self) -> None:
        self.step_kind = f"{self.env_id}:step"

    def answer(self, first: dict[str, Any]) -> dict[str, Any]:
        """The `EpisodeCreated` answer of a create or reset that returned `first`, with the server's
        TTLs (`lifetimes`)."""
        return {"episode_id": self.episode_id, "env_id": self.env_id, **first, **self.lifetimes}

    def check_open(self, when_over: str) -> None:
        """Raise the answer to a call that needs the episode running: a 404 once it is closed, a
        409 once it is over (`when_over` says what to do instead)."""
        if self.closed:
            raise gone(self)
        if self.over:
            raise ApiError(409, ErrorCode.EPISODE_OVER, f"episode {self.episode_id} is over; {when_over}")

    def status(self) -> dict[str, Any]:
        now = time.monotonic()
        state = "closed" if self.closed else ("done" if self.over else "running")
        return {
            "episode_id": self.episode_id, "env_id": self.env_id, "status": state, "turns": self.turns,
            "age_s": round(now - self.created, 3), "idle_s": round(now - self.last_used, 3),
            "seed": self.seed,
        }


class EpisodeRegistry:
    def __init__(self, config: ServerConfig, metrics: Metrics) -> None:
        self.config = config
        self.metrics = metrics
        self.env_ids = tuple(config.env_ids or ENV_ENTRY_POINTS)
        self.dispatch = PackedExecutor(config.workers)
        self.episodes: dict[str, LiveEpisode] = {}
        self.holder = config.resolved_holder()
        self._prefix = self.holder + "."
        self.shutting_down = False
        self._starting = 0
        self.creates = Remembered(config.max_episodes)  # (client key, request_id) -> the answer
        self._reserved: dict[str, frozenset[str]] = {}  # env id -> the constructor arguments of its operator
        self.closes = Remembered(config.max_episodes)  # (client key, episode, request_id) -> True
        self._reaper: asyncio.Task | None = None
        self.recently_closed = RecentlyClosed()
        # the episodes it ended: a later call on one is told it was closed or expired (`answers.ended`),
        # not that it is unknown, which a cluster client replays
        path = memory_path(config.state_dir, self.holder) if config.state_dir else None
        self.ended = EndedEpisodes(config.ended_memory, path)
        # what every create and reset answers: how long its episode may idle and live here
        self.lifetimes = {"idle_ttl_s": config.idle_ttl_s, "max_age_s": config.max_age_s}

    # --- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())

    async def shutdown(self) -> None:
        """Refuse new episodes, close every live one, then stop the threads."""
        self.shutting_down = True
        if self._reaper is not None:
            self._reaper.cancel()
        live = list(self.episodes)
        await asyncio.gather(*(self.close(eid, "shutdown") for eid in live))
        self.dispatch.shutdown()
        self.ended.close()
        log.info("closed %d episodes on shutdown", len(live))

    async def _reap_forever(self) -> None:
        while True:
            await asyncio.sleep(self.config.reap_interval_s)
            await self.reap()

    async def reap(self) -> int:
        """Close episodes idle past the TTL or older than the max age; returns how many."""
        now = time.monotonic()
        doomed = []
        for ep in list(self.episodes.values()):
            if now - ep.created > self.config.max_age_s:
                doomed.append((ep.episode_id, "max_age"))
            elif now - ep.last_used > self.config.idle_ttl_s and not ep.lock.locked():
                doomed.append((ep.episode_id, "idle"))
        await asyncio.gather(*(self.close(eid, why) for eid, why in doomed))
        self.ended.forget_old(time.time())
        return len(doomed)

    @property
    def live(self) -> int:
        return len(self.episodes)

    # --- episodes --------------------------------------------------------------------------
    def check_env_id(self, env_id: str) -> None:
        if env_id not in self.env_ids:
            raise ApiError(404, ErrorCode.UNKNOWN_ENV,
                           f"unknown env {env_id!r}; served envs: {', '.join(self.env_ids)}")

    def get(self, episode_id: str) -> LiveEpisode:
        """The live episode `episode_id`, if the caller may reach it; else the 404 that says why
        (another client's episode is answered as unknown: its existence is not told)."""
        ep = self.episodes.get(episode_id)
        if ep is not None and not CALLER.get().reaches(ep.owner):
            raise ended(episode_id, None)
        if ep is None:
            holder, dot, _ = episode_id.partition(".")
            if dot and holder != self.holder:
                raise ApiError(404, ErrorCode.UNKNOWN_EPISODE, f"episode {episode_id!r} is held by "
                               f"{holder!r}, not by this server ({self.holder!r}): route it by its id")
            gone_for_good = self.ended.get(episode_id)
            if gone_for_good is None or not CALLER.get().reaches_ended(gone_for_good.owner):
                raise ended(episode_id, None)  # to anyone but its client, as if it never existed
            raise ended(episode_id, gone_for_good.reason)
        return ep

    def check_capacity(self, n: int) -> None:
        """Refuse (429) when `n` more episodes would take the server past its maximum."""
        if self.live + self._starting + n > self.config.max_episodes:
            retry = max(1, math.ceil(self.config.reap_interval_s))
            raise ApiError(429, ErrorCode.CAPACITY,
                           f"capacity reached: {self.config.max_episodes} live episodes; close some or retry",
                           headers={"Retry-After": str(retry)})

    @contextlib.contextmanager
    def reserve(self, n: int) -> Iterator[None]:
        """Hold room for `n` episodes while they are being built, so that no other create takes it."""
        self.check_capacity(n)
        self._starting += n
        try:
            yield
        finally:
            self._starting -= n

    def new_episode(self, env_id: str, env: gym.Env, seed: int | None) -> LiveEpisode:
        """An episode of `env`, under a new id of this holder, not live yet (see `admit`)."""
        episode_id = self._prefix + os.urandom(16).hex()  # a UUID4's 128 random bits, without building one
        return LiveEpisode(episode_id, env_id, env, seed, Remembered(self.config.idempotency_window),
                           owner=CALLER.get().key, lifetimes=self.lifetimes)

    def admit(self, ep: LiveEpisode) -> None:
        """Make a built episode live."""
        self.episodes[ep.episode_id] = ep
        self.metrics.episodes_created.labels(ep.env_id).inc()
        self.metrics.live_episodes.set(self.live)

    def env_kwargs(self, env_id: str, requested: dict[str, Any]) -> dict[str, Any]:
        """The operator's constructor arguments for `env_id`, with the client's on top.

        Arguments that reach outside the episode (the env's `operator_kwargs`: endpoints,
        credentials, server-side paths) are the operator's alone; a client asking for them is refused
        rather than silently overridden.
        """
        reserved = self._reserved.get(env_id)
        if reserved is None:  # looked up once per env: an import lookup costs more than a light env's step
            operator_kwargs = getattr(load_env_class(env_id), "operator_kwargs", ())
            reserved = self._reserved[env_id] = frozenset({"base_url", *operator_kwargs})
        if not requested:
            return self.config.env_kwargs.get(env_id, {})
        if refused := sorted(reserved & set(requested)):
            raise ApiError(400, ErrorCode.ENV_REJECTED,
                           f"env_kwargs may not set {', '.join(refused)}: only the server's operator can "
                           "(agentrl serve --env-kwargs)")
        return {**self.config.env_kwargs.get(env_id, {}), **requested}

    async def create(
        self,
        env_id: str,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
        env_kwargs: dict[str, Any] | None = None,
        request_id: str | None = None,
    ) -> tuple[LiveEpisode | None, dict[str, Any]]:
        """A new episode, built and reset; returns it and its `EpisodeCreated` answer. A retry of
        `request_id` gets the first create's answer (and its episode, None once closed). The answer
        is what is remembered, not the episode, so that a closed episode's env is freed at its close,
        not when its create is forgotten, `max_episodes` creates later."""
        if self.shutting_down:
            raise ApiError(503, ErrorCode.SHUTTING_DOWN, "the server is shutting down")
        self.check_env_id(env_id)
        answer = await self.later(Create(self, env_id, seed, options, env_kwargs, request_id))
        return self.episodes.get(answer["episode_id"]), answer

    def create_now(self, item: CreateCall, busy: Container[str] = ()) -> bytes | None:
        """`create` run right here (`now`), its `BatchResult` encoded, where nothing stands in the
        way (a full server, a refused argument: `create` answers those); else None."""
        if (self.shutting_down or item.env_id not in self.env_ids
                or self.live + self._starting >= self.config.max_episodes):
            return None
        op = Create(self, item.env_id, item.seed, item.options, item.env_kwargs, item.request_id)
        answer = self.now(op)
        if answer is None:
            return None
        if isinstance(answer, ApiError):
            return self.error_item(None, answer)
        return encode_item(answer["episode_id"], 201, dumps(answer))

    async def reset(self, ep: LiveEpisode, seed: int | None, options: dict[str, Any] | None,
                    request_id: str | None = None) -> dict[str, Any]:
        """Start a new episode on an existing env (the OpenEnv session's `reset`); returns the first
        observation and info. A retry of `request_id` gets the first reset's answer."""
        return await self.later(Reset(ep, seed, options, request_id))

    def reset_now(self, item: ResetCall, busy: Container[str] = ()) -> bytes | None:
        """`reset` run right here (`now`), its `BatchResult` encoded, where its episode is idle;
        else None."""
        ep = self._idle(item.episode_id, busy)
        if ep is None:
            return None
        first = self.now(Reset(ep, item.seed, item.options, item.request_id))
        if first is None:
            return None
        if isinstance(first, ApiError):
            return self.error_item(ep.episode_id, first)
        return encode_item(ep.episode_id, 200, dumps(ep.answer(first)))

    # --- steps: one path, whichever way a step came ---------------------------------------------
    async def step(self, episode_id: str, action: str, request_id: str | None = None) -> Stepped:
        """Run one step (`run_steps` of one); returns its result and the result's encoding, or
        raises the `ApiError` it is answered with."""
        item = BatchItem.model_construct(episode_id=episode_id, action=action, request_id=request_id)
        [outcome] = await self.run_steps([item])
        if isinstance(outcome, ApiError):
            raise outcome
        return outcome

    async def step_many(self, steps: Sequence[BatchItem]) -> list[bytes]:
        """Each step's `BatchResult`, encoded, in the order given; an error stays with its item."""
        outcomes = await self.run_steps(steps)
        return [self.item(step.episode_id, outcome) for step, outcome in zip(steps, outcomes, strict=True)]

    async def run_steps(self, steps: Sequence[BatchItem]) -> list[StepOutcome]:
        """Each step's outcome, in the order given: the one way the server runs steps."""
        return await run_in_order(steps, self.step_now, self.step_later, self.dispatch.target_s)

    def item(self, episode_id: str, outcome: StepOutcome) -> bytes:
        """A step's outcome as the encoded `BatchResult` of a batch or a frame."""
        if isinstance(outcome, ApiError):
            return self.error_item(episode_id, outcome)
        return encode_item(episode_id, 200, outcome[1])

    def step_now(self, item: BatchItem, busy: Container[str] = ()) -> StepOutcome | None:
        """The outcome of a step run right here (`now`), where its episode is idle and its action
        within bounds; else None, and `step_later` answers it (errors included). `busy`: episodes
        with steps handed to `step_later` that have not started yet, which must go first."""
        ep = self._idle(item.episode_id, busy)
        if ep is None or len(item.action) > self.config.max_action_chars:
            return None
        return self.now(Step(self, ep, item.action, item.request_id))

    async def step_later(self, item: BatchItem) -> StepOutcome:
        """The outcome of a step run in a task (`later`)."""
        try:
            ep = self.get(item.episode_id)
            if len(item.action) > self.config.max_action_chars:
                raise ApiError(413, ErrorCode.ACTION_TOO_LARGE, f"action has {len(item.action)} characters; "
                               f"the limit is {self.config.max_action_chars}")
            return await self.later(Step(self, ep, item.action, item.request_id))
        except ApiError as exc:
            return exc

    def error_item(self, episode_id: str | None, exc: ApiError) -> bytes:
        """The encoded `BatchResult` of an item answered with `exc` (counted as an error)."""
        self.metrics.errors.labels(exc.code).inc()
        return exc.item(episode_id)

    async def render(self, episode_id: str) -> str | None:
        """The episode's env rendered (`env.render()`), run in a task (`later`)."""
        return await self.later(Render(self.get(episode_id)))

    async def close(self, episode_id: str, reason: str = "client") -> bool:
        """Close an episode (after a step it is running); False if there is none by that id."""
        ep = self.take_out(episode_id, reason)
        if ep is None:
            return False
        return await self.later(Close(self, ep, reason))

    async def close_once(self, episode_id: str, request_id: str | None = None) -> None:
        """`close` for a client: an unknown episode is a 404, except to a retry of `request_id`,
        which gets the first close's answer."""
        async def run() -> bool:
            self.get(episode_id)  # the 404 of an episode that is not live, or not the caller's
            if not await self.close(episode_id):
                self.get(episode_id)  # closed meanwhile: the 404 that says so
            return True

        key = None if request_id is None else (CALLER.get().key, episode_id, request_id)
        await self.closes.once(key, run)

    def close_now(self, item: CloseCall, busy: Container[str] = ()) -> bytes | None:
        """`close_once` run right here (`now`), its `BatchResult` encoded, where its episode is
        idle; else None."""
        ep = self._idle(item.episode_id, busy)
        if ep is None:
            return None
        key = None if item.request_id is None else (CALLER.get().key, item.episode_id, item.request_id)
        op = Close(self, ep, "client", key)
        if not self.runs_now(op):
            return None
        self.take_out(item.episode_id, "client")
        self.now(op)
        return encode_item(item.episode_id, 200, encode_closed(item.episode_id))

    # --- the one runner of every operation ------------------------------------------------------
    def _idle(self, episode_id: str, busy: Container[str]) -> LiveEpisode | None:
        """The live episode `episode_id` if a call on it may run at once: the caller's, with no call
        under way (its lock free) and none waiting in the caller's batch (`busy`)."""
        ep = self.episodes.get(episode_id)
        if ep is None or not CALLER.get().reaches(ep.owner) or ep.lock.locked() or episode_id in busy:
            return None
        return ep

    def runs_now(self, op: Operation[Any]) -> bool:
        """Whether `op` may run at once on the event loop: its kind measured short
        (`dispatch.inline`), and no answer to its request remembered (a retry goes to `later`)."""
        return self.dispatch.inline(op.kind) and (op.key is None or op.key not in op.memory)

    def now(self, op: Operation[T]) -> T | ApiError | None:
        """`op` run right here, on the event loop, at once: its answer, or the `ApiError` it is
        answered with; None where it may not (`runs_now`) or a check refuses it, and `later` runs
        it. For a light env this saves the task, lock and futures of a call, which cost more than
        the call."""
        if not self.runs_now(op):
            return None
        try:
            op.prepare()
        except ApiError:
            return None
        started = time.perf_counter()
        try:
            value, error = op.call(), None
        except Exception as exc:
            value, error = None, op.fail(exc)
            if error is not None:
                error.__cause__ = exc
        seconds = time.perf_counter() - started
        self.dispatch.ran_inline(op.kind, seconds)
        if error is not None:
            op.memory.keep(op.key, None, error)
            return error
        answer = op.done(value, seconds)
        op.memory.keep(op.key, answer)
        return answer

    async def later(self, op: Operation[T]) -> T:
        """`op` run in a task: under its episode's lock, its env call through the dispatcher; its
        answer, or the `ApiError` it raises. A retry of its request gets the first run's answer."""
        async def run() -> T:
            async with op.lock or contextlib.nullcontext():
                op.prepare()
                with self.reserve(op.room) if op.room else contextlib.nullcontext():
                    started = time.perf_counter()
                    try:
                        value = await self.dispatch.run(op.kind, op.call)
                    except Exception as exc:
                        if (error := op.fail(exc)) is not None:
                            raise error from exc
                        value = None
                    return op.done(value, time.perf_counter() - started)

        return await op.memory.once(op.key, run)

    def take_out(self, episode_id: str, reason: str) -> LiveEpisode | None:
        """The episode, no longer live (None if there is none by that id)."""
        ep = self.episodes.pop(episode_id, None)
        if ep is not None:
            # why, from the moment it is no longer live: a call that finds it gone while its close
            # waits for a step to finish is told it was closed, not that it is unknown
            ep.end_reason = reason
            if reason in ENDED:  # kept until its age is past the max: then a client's own clocks tell
                forget_at = time.time() + self.config.max_age_s - (time.monotonic() - ep.created)
                self.ended.add(episode_id, Ended(reason, key_digest(ep.owner), forget_at + KEEP_PAST_AGE_S))
            self.metrics.live_episodes.set(self.live)
            self.metrics.episodes_closed.labels(reason).inc()
        return ep
