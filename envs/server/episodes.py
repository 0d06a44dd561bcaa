"""The episode registry: every live episode, its env instance, its lock and its lifetime.

Env code is blocking, so it runs off the event loop's own work (see `dispatch.py`); an
`asyncio.Lock` per episode keeps one episode's steps in order while different episodes step at
the same time. Results are encoded to JSON where the step ran, so the event loop only moves bytes.

An episode id names the server process holding the episode (`<holder>.<random hex>`), so that
whatever spreads episodes over several processes can route each request by its id alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid
from collections import OrderedDict
from collections.abc import Container, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from agentrl.core import EpisodeOverError, StepResult
from agentrl.registration import ENV_ENTRY_POINTS, load_env_class, make_env
from agentrl.server.config import ServerConfig
from agentrl.server.dispatch import PackedExecutor
from agentrl.server.metrics import Metrics
from agentrl.server.transcript import ClosedEpisode, RecentlyClosed, Transcript
from agentrl.server.wire import BatchItem, ErrorCode, dumps

log = logging.getLogger("agentrl.server")


class ApiError(Exception):
    """An error answered to the client with `status` and the `ErrorBody` shape."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}

    def body(self) -> dict[str, str]:
        return {"error": self.code, "message": self.message}


@dataclass(eq=False)
class Episode:
    episode_id: str
    env_id: str
    env: gym.Env
    seed: int | None
    created: float = field(default_factory=time.monotonic)
    last_used: float = field(default_factory=time.monotonic)
    turns: int = 0
    over: bool = False
    closed: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    step_kind: str = field(init=False)  # the dispatcher's name for this env's steps, made once
    # request_id -> future of (result, encoded bytes), oldest first
    results: OrderedDict[str, asyncio.Future] = field(default_factory=OrderedDict)
    transcript: Transcript = field(default_factory=Transcript)  # for watchers (GET .../transcript, /ui)

    def __post_init__(self) -> None:
        self.step_kind = f"{self.env_id}:step"

    def status(self) -> dict[str, Any]:
        now = time.monotonic()
        state = "closed" if self.closed else ("done" if self.over else "running")
        return {
            "episode_id": self.episode_id, "env_id": self.env_id, "status": state, "turns": self.turns,
            "age_s": round(now - self.created, 3), "idle_s": round(now - self.last_used, 3),
            "seed": self.seed,
        }


def _build_and_reset(
    env_id: str, env_kwargs: dict[str, Any], seed: int | None, options: dict[str, Any] | None
) -> tuple[gym.Env, dict[str, Any]]:
    env = make_env(env_id, **env_kwargs)
    try:
        observation, info = env.reset(seed=seed, options=options)
        return env, {"observation": observation, "info": info}
    except BaseException:
        env.close()
        raise


def _reset(env: gym.Env, seed: int | None, options: dict[str, Any] | None) -> dict[str, Any]:
    observation, info = env.reset(seed=seed, options=options)
    return {"observation": observation, "info": info}


def _settle(future: asyncio.Future, exc: BaseException) -> None:
    future.set_exception(exc)
    future.exception()  # marks it retrieved: a retry may never come


class EpisodeRegistry:
    def __init__(self, config: ServerConfig, metrics: Metrics) -> None:
        self.config = config
        self.metrics = metrics
        self.env_ids = tuple(config.env_ids or ENV_ENTRY_POINTS)
        self.dispatch = PackedExecutor(config.workers)
        self.episodes: dict[str, Episode] = {}
        self.holder = config.resolved_holder()
        self._prefix = self.holder + "."
        self.shutting_down = False
        self._starting = 0
        self._creates: OrderedDict[str, asyncio.Future] = OrderedDict()
        self._reaper: asyncio.Task | None = None
        self.recently_closed = RecentlyClosed()

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
        return len(doomed)

    @property
    def live(self) -> int:
        return len(self.episodes)

    # --- episodes --------------------------------------------------------------------------
    def check_env_id(self, env_id: str) -> None:
        if env_id not in self.env_ids:
            raise ApiError(404, ErrorCode.UNKNOWN_ENV,
                           f"unknown env {env_id!r}; served envs: {', '.join(self.env_ids)}")

    def get(self, episode_id: str) -> Episode:
        ep = self.episodes.get(episode_id)
        if ep is None:
            holder, dot, _ = episode_id.partition(".")
            if dot and holder != self.holder:
                raise ApiError(404, ErrorCode.UNKNOWN_EPISODE, f"episode {episode_id!r} is held by "
                               f"{holder!r}, not by this server ({self.holder!r}): route it by its id")
            raise ApiError(404, ErrorCode.UNKNOWN_EPISODE,
                           f"no live episode {episode_id!r} (never created, closed, or expired)")
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

    def new_id(self) -> str:
        return self._prefix + uuid.uuid4().hex

    def admit(self, ep: Episode) -> None:
        """Make a built episode live."""
        self.episodes[ep.episode_id] = ep
        self.metrics.episodes_created.labels(ep.env_id).inc()
        self.metrics.live_episodes.set(self.live)

    def _env_kwargs(self, env_id: str, requested: dict[str, Any]) -> dict[str, Any]:
        """The operator's constructor arguments for `env_id`, with the client's on top.

        Arguments that reach outside the episode (the env's `operator_kwargs`: endpoints,
        credentials, server-side paths) are the operator's alone; a client asking for them is refused
        rather than silently overridden.
        """
        reserved = {"base_url"} | set(getattr(load_env_class(env_id), "operator_kwargs", ()))
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
    ) -> tuple[Episode, dict[str, Any]]:
        if self.shutting_down:
            raise ApiError(503, ErrorCode.SHUTTING_DOWN, "the server is shutting down")
        self.check_env_id(env_id)
        if request_id is not None:
            earlier = self._creates.get(request_id)
            if earlier is not None:
                return await asyncio.shield(earlier)
        env_kwargs = self._env_kwargs(env_id, env_kwargs or {})
        self.check_capacity(1)
        future: asyncio.Future | None = None
        if request_id is not None:
            future = asyncio.get_running_loop().create_future()
            remember(self._creates, request_id, future, self.config.max_episodes)
        self._starting += 1
        try:
            try:
                env, first = await self.dispatch.run(
                    f"{env_id}:create", _build_and_reset, env_id, env_kwargs, seed, options
                )
            except Exception as exc:
                raise ApiError(400, ErrorCode.ENV_REJECTED,
                               f"{env_id} could not start: {type(exc).__name__}: {exc}") from exc
            ep = Episode(self.new_id(), env_id, env, seed)
            ep.transcript.begin(first)
            self.admit(ep)
            result = (ep, {"episode_id": ep.episode_id, "env_id": env_id, **first})
        except ApiError as exc:
            if future is not None:
                _settle(future, exc)
            raise
        finally:
            self._starting -= 1
        if future is not None:
            future.set_result(result)
        return result

    async def reset(self, ep: Episode, seed: int | None, options: dict[str, Any] | None) -> dict[str, Any]:
        """Start a new episode on an existing env (the OpenEnv session's `reset`)."""
        async with ep.lock:
            if ep.closed:
                raise gone(ep)
            try:
                first = await self.dispatch.run(f"{ep.env_id}:reset", _reset, ep.env, seed, options)
            except Exception as exc:
                message = f"reset failed: {type(exc).__name__}: {exc}"
                raise ApiError(400, ErrorCode.ENV_REJECTED, message) from exc
            ep.turns, ep.over, ep.seed = 0, False, seed
            ep.transcript.begin(first)
            ep.results.clear()
            ep.last_used = time.monotonic()
            return first

    async def step(self, episode_id: str, action: str, request_id: str | None = None
                   ) -> tuple[StepResult, bytes]:
        """Run one step; returns its result and the result's JSON encoding."""
        ep = self.get(episode_id)
        if len(action) > self.config.max_action_chars:
            limit = self.config.max_action_chars
            raise ApiError(413, ErrorCode.ACTION_TOO_LARGE,
                           f"action has {len(action)} characters; the limit is {limit}")
        if request_id is None:
            return await self._step(ep, action)
        earlier = ep.results.get(request_id)
        if earlier is not None:
            return await asyncio.shield(earlier)
        future = asyncio.get_running_loop().create_future()
        remember(ep.results, request_id, future, self.config.idempotency_window)
        try:
            outcome = await self._step(ep, action)
        except ApiError as exc:
            _settle(future, exc)
            raise
        future.set_result(outcome)
        return outcome

    async def _step(self, ep: Episode, action: str) -> tuple[StepResult, bytes]:
        async with ep.lock:
            if ep.closed:
                raise gone(ep)
            if ep.over:
                raise ApiError(409, ErrorCode.EPISODE_OVER,
                               f"episode {ep.episode_id} is over; create a new episode")
            started = time.perf_counter()
            try:
                result, body = await self.dispatch.run(ep.step_kind, _step_and_encode, ep.env, action)
            except Exception as exc:
                raise _step_failed(ep, exc) from exc
            self._stepped(ep, action, result, body, time.perf_counter() - started)
            return result, body

    def _stepped(self, ep: Episode, action: str, result: StepResult, body: bytes, seconds: float) -> None:
        self.metrics.stepped(ep.env_id, seconds)
        ep.turns += 1
        ep.transcript.record(action, result.reward, body)
        ep.over = result.terminated or result.truncated
        ep.last_used = time.monotonic()

    def step_now(self, item: BatchItem, busy: Container[str] = ()) -> bytes | None:
        """`_item` for a step that can run right here, on the event loop, at once: its env's steps
        are measured cheap (`dispatch.inline`), its episode is idle, and its request is new; else
        None, and `step_many` answers it (errors included). For a light env this saves the task,
        lock and futures per step, which cost more than its step. `busy`: episodes with steps
        handed to `step_many` that have not started yet, which must go first."""
        ep = self.episodes.get(item.episode_id)
        request_id, action = item.request_id, item.action
        if (ep is None or ep.lock.locked() or ep.closed or ep.over or not self.dispatch.inline(ep.step_kind)
                or request_id in ep.results or item.episode_id in busy
                or len(action) > self.config.max_action_chars):
            return None
        started = time.perf_counter()
        try:
            result, body = _step_and_encode(ep.env, action)
        except Exception as exc:
            error = _step_failed(ep, exc)
            error.__cause__ = exc
        else:
            error = None
        seconds = time.perf_counter() - started
        self.dispatch.ran_inline(ep.step_kind, seconds)
        if request_id is not None:
            done = asyncio.get_running_loop().create_future()
            remember(ep.results, request_id, done, self.config.idempotency_window)
        if error is not None:
            if request_id is not None:
                _settle(done, error)
            return self._error_item(item.episode_id, error)
        self._stepped(ep, action, result, body, seconds)
        if request_id is not None:
            done.set_result((result, body))
        return _item_head(item.episode_id) + b',"status":200,"result":' + body + b',"error":null}'

    async def step_many(self, steps: Sequence[BatchItem]) -> list[bytes]:
        """Each step's `BatchResult`, encoded, in the order given; an error stays with its item.

        Steps that can run at once (`step_now`) run here, `dispatch.target_s` of them per loop
        iteration, so that a large batch does not hold the loop and the batches of many
        connections take turns; each of the others gets a task (`_item`: the lock, the dispatcher).
        The steps start in order, an episode's lock is first come, first served, and an episode
        with a step gone to a task has its later steps go the same way, so steps of one episode in
        one batch run in the batch's order.
        """
        parts: list[Any] = []
        later: list[tuple[int, asyncio.Task]] = []
        busy: set[str] = set()
        loop = asyncio.get_running_loop()
        slice_end = time.perf_counter() + self.dispatch.target_s
        for i, s in enumerate(steps):
            part = self.step_now(s, busy)
            parts.append(part)
            if part is None:  # handing a step to a task takes no slice: the calls it makes are packed
                busy.add(s.episode_id)
                later.append((i, loop.create_task(self._item(s.episode_id, s.action, s.request_id))))
            elif time.perf_counter() > slice_end:
                await asyncio.sleep(0)
                slice_end = time.perf_counter() + self.dispatch.target_s
        for i, task in later:
            parts[i] = await task
        return parts

    async def _item(self, episode_id: str, action: str, request_id: str | None) -> bytes:
        try:
            _, body = await self.step(episode_id, action, request_id)
        except ApiError as exc:
            return self._error_item(episode_id, exc)
        return _item_head(episode_id) + b',"status":200,"result":' + body + b',"error":null}'

    def _error_item(self, episode_id: str, exc: ApiError) -> bytes:
        self.metrics.errors.labels(exc.code).inc()
        tail = b',"status":%d,"result":null,"error":%s}' % (exc.status, dumps(exc.body()))
        return _item_head(episode_id) + tail

    async def render(self, episode_id: str) -> str | None:
        ep = self.get(episode_id)
        async with ep.lock:
            return await self.dispatch.run(f"{ep.env_id}:render", ep.env.render)

    async def close(self, episode_id: str, reason: str = "client") -> bool:
        ep = self.episodes.pop(episode_id, None)
        if ep is None:
            return False
        self.metrics.live_episodes.set(self.live)
        self.metrics.episodes_closed.labels(reason).inc()
        async with ep.lock:  # let a running step finish first
            ep.closed = True
            self.recently_closed.add(ClosedEpisode(ep.episode_id, ep.env_id, ep.seed, ep.turns, ep.over,
                                                   time.monotonic() - ep.created, reason, ep.transcript))
            with contextlib.suppress(Exception):  # a failing close must not keep the episode alive
                await self.dispatch.run(f"{ep.env_id}:close", ep.env.close)
        return True


def remember(table: OrderedDict, key: str, future: asyncio.Future, limit: int) -> None:
    """Keep `future` as the answer to a retry of `key`, forgetting the oldest beyond `limit`."""
    table[key] = future
    while len(table) > limit:
        table.popitem(last=False)


def gone(ep: Episode) -> ApiError:
    """The answer to a call on an episode closed while the call waited for it."""
    return ApiError(404, ErrorCode.UNKNOWN_EPISODE, f"episode {ep.episode_id} was closed")


def _item_head(episode_id: str) -> bytes:
    return b'{"episode_id":' + dumps(episode_id)


def _step_failed(ep: Episode, exc: Exception) -> ApiError:
    """The error answered for a step whose env raised `exc`."""
    if isinstance(exc, EpisodeOverError):
        ep.over = True
        return ApiError(409, ErrorCode.EPISODE_OVER, str(exc))
    return ApiError(500, ErrorCode.ENV_ERROR,
                    f"{ep.env_id} raised while stepping: {type(exc).__name__}: {exc}")


def _step_and_encode(env: gym.Env, action: str) -> tuple[StepResult, bytes]:
    result = StepResult.of(env.step(action))
    return result, dumps(result)
