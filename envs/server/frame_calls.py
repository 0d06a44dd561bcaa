"""The items of a `/v1/ws` frame: steps, and the calls that start and end episodes.

A frame carries an episode's whole life (see `agentrl.protocol`): create, reset, steps, close
and fork, each with its own `request_id`, result and error, so that a rollout worker running
short episodes pays one message per batch of calls instead of an HTTP request per create, reset
and close. Each kind of item runs the way a step does: right on the event loop when its env's
calls of that kind are measured short and nothing stands in the way (`now`), else in a task
through the registry's async call (`later`), whose request-id memory is the one the HTTP routes
use, so that a retried item, over either path, never runs twice.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence

from agentrl.protocol import (
    BatchItem,
    CloseCall,
    CreateCall,
    ForkCall,
    FrameItem,
    ResetCall,
    dumps,
    encode_closed,
    encode_item,
)
from agentrl.server.call_answers import ApiError
from agentrl.server.dispatch import run_in_order
from agentrl.server.episodes import EpisodeRegistry
from agentrl.server.forks import Forks

_Now = Callable[..., "bytes | None"]


class FrameCalls:
    """Runs frame items on one registry: `now` and `many` are what `step_socket.StepSocket` calls."""

    def __init__(self, registry: EpisodeRegistry, forks: Forks,
                 on_replay: Callable[[str], None] | None = None) -> None:
        self.registry = registry
        self.forks = forks
        self.on_replay = on_replay  # told the env id of every create that replays a lost episode
        self._now: dict[str, _Now] = {
            "step": self._step_now, "create": registry.create_now, "reset": registry.reset_now,
            "close": registry.close_now, "fork": _never,
        }

    def now(self, item: FrameItem, busy: Container[str] = ()) -> bytes | None:
        """The item's encoded `BatchResult` if it can run at once, here; else None."""
        answer = self._now[item.op](item, busy)
        if answer is not None and isinstance(item, CreateCall):
            self._count_replay(item)
        return answer

    async def many(self, items: Sequence[FrameItem]) -> list[bytes]:
        """Every item's encoded `BatchResult`, in order; items of one episode run in order."""
        return await run_in_order(items, self.now, self.later, self.registry.dispatch.target_s)

    async def later(self, item: FrameItem) -> bytes:
        """The item's encoded `BatchResult`, through the registry's async call (the one its HTTP
        route makes), its error included."""
        registry = self.registry
        if isinstance(item, BatchItem):
            return registry.item(item.episode_id, await registry.step_later(item))
        episode_id = getattr(item, "episode_id", None)
        try:
            if isinstance(item, CreateCall):
                _, answer = await registry.create(item.env_id, item.seed, item.options, item.env_kwargs,
                                                  item.request_id)
                self._count_replay(item)
                return encode_item(answer["episode_id"], 201, dumps(answer))
            if isinstance(item, ResetCall):
                ep = registry.get(item.episode_id)
                first = await registry.reset(ep, item.seed, item.options, item.request_id)
                return encode_item(ep.episode_id, 200, dumps(ep.answer(first)))
            if isinstance(item, CloseCall):
                await registry.close_once(item.episode_id, item.request_id)
                return encode_item(item.episode_id, 200, encode_closed(item.episode_id))
            assert isinstance(item, ForkCall)
            made = await self.forks.fork(item.episode_id, item.n, item.request_id)
            return encode_item(item.episode_id, 201, dumps({"episodes": made}))
        except ApiError as exc:
            return registry.error_item(episode_id, exc)

    def _step_now(self, item: BatchItem, busy: Container[str] = ()) -> bytes | None:
        outcome = self.registry.step_now(item, busy)
        return None if outcome is None else self.registry.item(item.episode_id, outcome)

    def _count_replay(self, item: CreateCall) -> None:
        if item.replay_of is not None and self.on_replay is not None:
            self.on_replay(item.env_id)


def _never(item: ForkCall, busy: Container[str] = ()) -> None:
    """Forks always run in a task: they copy an env, which is never as cheap as a step."""
    return None
