"""The episode operations (create, reset, step, close, fork, and the reads of an episode's record
and rendering), each written once: its checks, its env call, the answer to a call that raised, and
what a call that returned does to the registry.

`EpisodeRegistry.now` runs an operation right on the event loop, where its env's calls of that kind
are measured short and nothing stands in its way; `EpisodeRegistry.later` runs it in a task, under
its episode's lock, its env call through the dispatcher. Both keep its answer (or the `ApiError` it
is answered with) by its request id, so that a retry, whichever way it comes, never runs it twice.
Forks, trajectory records and renderings always run in a task (`later`): they copy or walk an env,
never as cheap as a step, and under the episode's lock they see a state no step is changing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import deque
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import gymnasium as gym

from agentrl.core import StepResult
from agentrl.protocol import dumps, encode_step, loads
from agentrl.registration import make_env
from agentrl.server.call_answers import (
    ApiError,
    Remembered,
    env_failed,
    env_raised,
    gone,
    reset_failed,
    start_failed,
)
from agentrl.server.owners import CALLER
from agentrl.server.transcript import ClosedEpisode

if TYPE_CHECKING:
    from agentrl.server.episodes import EpisodeRegistry, LiveEpisode

log = logging.getLogger("agentrl.server")
T = TypeVar("T")
Stepped = tuple[StepResult, bytes]  # a step's result and its encoding
First = dict[str, Any]  # a create's or a reset's first observation and info
Made = list[dict[str, Any]]  # a fork's new episodes, each an `EpisodeForked`


class Operation(Generic[T]):
    """One call of an episode operation, whichever way it runs; its answer is remembered by `key`
    in `memory`."""

    kind: str  # the dispatcher's name for its env call
    memory: Remembered
    key: Hashable | None = None  # its request id, as `memory` keeps it (None: not remembered)
    lock: asyncio.Lock | None = None  # held while it runs in a task
    room = 0  # episodes it adds, held for it while it runs in a task (`EpisodeRegistry.reserve`)

    def prepare(self) -> None:
        """Raise the `ApiError` that refuses the call (in a task: under the lock)."""

    def call(self) -> Any:
        """The env call: blocking, run on the event loop or in a worker thread."""
        raise NotImplementedError

    def fail(self, exc: Exception) -> ApiError | None:
        """The answer to an env call that raised `exc`; None where the failure is only logged and
        the call goes on as if it returned None."""
        raise NotImplementedError

    def done(self, value: Any, seconds: float) -> T:
        """The answer to an env call that returned `value` in `seconds`, its effects made."""
        raise NotImplementedError


class Create(Operation[First]):
    """A new episode, built and reset; answers its `EpisodeCreated` (the answer is what is
    remembered, not the episode, so that a closed episode's env is freed at its close)."""

    room = 1

    def __init__(self, registry: EpisodeRegistry, env_id: str, seed: int | None,
                 options: dict[str, Any] | None, env_kwargs: dict[str, Any] | None,
                 request_id: str | None) -> None:
        self.registry, self.env_id, self.seed, self.options = registry, env_id, seed, options
        self.requested, self.env_kwargs = env_kwargs or {}, {}
        self.kind, self.memory = f"{env_id}:create", registry.creates
        # remembered per client: another client's create with the same request id is a create of its own
        self.key = None if request_id is None else (CALLER.get().key, request_id)

    def prepare(self) -> None:
        self.env_kwargs = self.registry.env_kwargs(self.env_id, self.requested)

    def call(self) -> tuple[gym.Env, First]:
        env = make_env(self.env_id, **self.env_kwargs)
        try:
            return env, reset(env, self.seed, self.options)
        except BaseException:
            env.close()
            raise

    def fail(self, exc: Exception) -> ApiError:
        return start_failed(self.env_id, exc)

    def done(self, value: tuple[gym.Env, First], seconds: float) -> First:
        env, first = value
        ep = self.registry.new_episode(self.env_id, env, self.seed)
        ep.transcript.begin(first)
        self.registry.admit(ep)
        return ep.answer(first)


class Reset(Operation[First]):
    """A new episode on an existing env; answers its first observation and info."""

    def __init__(self, ep: LiveEpisode, seed: int | None, options: dict[str, Any] | None,
                 request_id: str | None) -> None:
        self.ep, self.seed, self.options = ep, seed, options
        self.kind, self.memory, self.lock = f"{ep.env_id}:reset", ep.results, ep.lock
        self.key = None if request_id is None else ("reset", request_id)

    def prepare(self) -> None:
        if self.ep.closed:
            raise gone(self.ep)

    def call(self) -> First:
        return reset(self.ep.env, self.seed, self.options)

    def fail(self, exc: Exception) -> ApiError:
        return reset_failed(exc)

    def done(self, value: First, seconds: float) -> First:
        ep = self.ep
        ep.turns, ep.over, ep.seed = 0, False, self.seed
        ep.transcript.begin(value)
        ep.last_used = time.monotonic()
        return value


class Step(Operation[Stepped]):
    """One step; answers its result and the result's encoding (encoded where the step ran)."""

    def __init__(self, registry: EpisodeRegistry, ep: LiveEpisode, action: str, request_id: str | None
                 ) -> None:
        self.registry, self.ep, self.action = registry, ep, action
        self.kind, self.memory, self.key, self.lock = ep.step_kind, ep.results, request_id, ep.lock

    def prepare(self) -> None:
        self.ep.check_open("create a new episode")

    def call(self) -> Stepped:
        result = StepResult.of(self.ep.env.step(self.action))
        return result, encode_step(result)

    def fail(self, exc: Exception) -> ApiError:
        return env_raised(self.ep, exc, "stepping")

    def done(self, value: Stepped, seconds: float) -> Stepped:
        ep, (result, body) = self.ep, value
        self.registry.metrics.stepped(ep.env_id, seconds)
        ep.turns += 1
        ep.transcript.record(self.action, result.reward, body)
        ep.over = result.terminated or result.truncated
        ep.last_used = time.monotonic()
        return value


class Close(Operation[bool]):
    """The close of an episode already taken out of the live ones (`EpisodeRegistry.take_out`),
    after any call under way on it; an env whose close fails is logged, never kept alive."""

    def __init__(self, registry: EpisodeRegistry, ep: LiveEpisode, reason: str,
                 key: Hashable | None = None) -> None:
        self.registry, self.ep, self.reason = registry, ep, reason
        self.kind, self.memory, self.key, self.lock = f"{ep.env_id}:close", registry.closes, key, ep.lock

    def prepare(self) -> None:
        ep = self.ep
        ep.closed = True
        self.registry.recently_closed.add(ClosedEpisode(
            ep.episode_id, ep.env_id, ep.seed, ep.turns, ep.over, time.monotonic() - ep.created,
            self.reason, ep.transcript, ep.owner))

    def call(self) -> None:
        self.ep.env.close()

    def fail(self, exc: Exception) -> None:  # a failing close must not keep the episode alive
        log.error("%s: closing episode %s failed", self.ep.env_id, self.ep.episode_id, exc_info=exc)

    def done(self, value: None, seconds: float) -> bool:
        return True


class Fork(Operation[Made]):
    """n new episodes in a live one's state, made together or not at all: each counts against
    capacity, gets its own id and clocks, belongs to whoever holds its parent, and starts with a
    copy of its parent's transcript, so that a watcher sees where it came from."""

    def __init__(self, registry: EpisodeRegistry, parent: LiveEpisode, n: int, request_id: str | None,
                 memory: Remembered) -> None:
        self.registry, self.parent, self.n, self.room = registry, parent, n, n
        self.kind, self.memory, self.lock = f"{parent.env_id}:fork", memory, parent.lock
        # remembered per client and parent: a retry answers the forks already made rather than more
        self.key = None if request_id is None else (CALLER.get().key, parent.episode_id, request_id)

    def prepare(self) -> None:
        self.registry.check_capacity(self.n)  # forks that cannot fit are refused whatever the parent's state
        self.parent.check_open("fork it before its last step")

    def call(self) -> list[gym.Env]:
        env: Any = self.parent.env  # a `TextEnv`: `fork` is its own (`agentrl.core.base`)
        children = env.fork(self.n)
        if len(children) != self.n:
            for child in children:
                child.close()
            raise RuntimeError(f"fork({self.n}) returned {len(children)} envs")
        return list(children)

    def fail(self, exc: Exception) -> ApiError:
        return env_raised(self.parent, exc, "forking")

    def done(self, value: list[gym.Env], seconds: float) -> Made:
        parent, registry = self.parent, self.registry
        parent.last_used = time.monotonic()
        transcript = parent.transcript  # the latest observation and info: the last step's, or the reset's
        latest = loads(transcript.steps[-1][1] if transcript.steps else transcript.first)
        made = []
        for env in value:
            child = registry.new_episode(parent.env_id, env, parent.seed)
            child.owner = parent.owner  # a fork belongs to whoever holds its parent, the operator's too
            child.turns = parent.turns
            child.transcript = dataclasses.replace(transcript, steps=deque(transcript.steps))
            registry.admit(child)
            made.append({"episode_id": child.episode_id, "env_id": child.env_id,
                         "observation": latest["observation"], "info": latest["info"], **registry.lifetimes,
                         "parent_id": parent.episode_id, "turns": child.turns})
        return made


class Read(Operation[T]):
    """A read of a live episode's env that changes nothing (its trajectory record, its rendering),
    under its lock; never remembered, and any exception its env raises is a 500."""

    doing: str  # what the env was doing, for the error of one that raised

    def __init__(self, ep: LiveEpisode, what: str) -> None:
        self.ep, self.kind, self.memory, self.lock = ep, f"{ep.env_id}:{what}", ep.results, ep.lock

    def prepare(self) -> None:
        if self.ep.closed:
            raise gone(self.ep)

    def fail(self, exc: Exception) -> ApiError:
        return env_failed(self.ep, exc, self.doing)

    def done(self, value: T, seconds: float) -> T:
        return value


class Trajectory(Read[bytes]):
    """The episode's trajectory record (`env.trajectory()`, forks as children), encoded."""

    doing = "recording its trajectory"

    def __init__(self, ep: LiveEpisode) -> None:
        super().__init__(ep, "trajectory")

    def call(self) -> bytes:
        env: Any = self.ep.env  # a `TextEnv`: `trajectory` is its own (`agentrl.core.base`)
        return dumps(env.trajectory())


class Render(Read[Any]):
    """The episode's env rendered (`env.render()`, per the env's `render_mode`)."""

    doing = "rendering"

    def __init__(self, ep: LiveEpisode) -> None:
        super().__init__(ep, "render")

    def call(self) -> Any:
        return self.ep.env.render()


def reset(env: gym.Env, seed: int | None, options: dict[str, Any] | None) -> First:
    observation, info = env.reset(seed=seed, options=options)
    return {"observation": observation, "info": info}
