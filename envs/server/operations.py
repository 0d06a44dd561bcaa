"""The episode operations (create, reset, step, close), each written once: its checks, its env call,
the answer to a call that raised, and what a call that returned does to the registry.

`EpisodeRegistry.now` runs an operation right on the event loop, where its env's calls of that kind
are measured short and nothing stands in its way; `EpisodeRegistry.later` runs it in a task, under
its episode's lock, its env call through the dispatcher. Both keep its answer (or the `ApiError` it
is answered with) by its request id, so that a retry, whichever way it comes, never runs it twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import gymnasium as gym

from agentrl.core import StepResult
from agentrl.protocol import encode_step
from agentrl.registration import make_env
from agentrl.server.answers import ApiError, Remembered, env_raised, gone, reset_failed, start_failed
from agentrl.server.owners import CALLER
from agentrl.server.transcript import ClosedEpisode

if TYPE_CHECKING:
    from agentrl.server.episodes import EpisodeRegistry, LiveEpisode

log = logging.getLogger("agentrl.server")
T = TypeVar("T")
Stepped = tuple[StepResult, bytes]  # a step's result and its encoding
First = dict[str, Any]  # a create's or a reset's first observation and info


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


def reset(env: gym.Env, seed: int | None, options: dict[str, Any] | None) -> First:
    observation, info = env.reset(seed=seed, options=options)
    return {"observation": observation, "info": info}
