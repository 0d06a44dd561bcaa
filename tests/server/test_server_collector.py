"""The serving garbage-collection policy: small young generations, survivors frozen, episodes still freed."""

from __future__ import annotations

import asyncio
import gc
import weakref

from server_helpers import ECHO, call

from agentrl.server import collector
from agentrl.server.config import ServerConfig
from agentrl.server.episodes import ApiError, EpisodeRegistry
from agentrl.server.metrics import Metrics


def test_survivors_of_a_middle_collection_leave_every_later_scan_and_come_back_after():
    before = gc.get_threshold()
    with collector.short_pauses():
        assert gc.get_threshold()[:2] == (collector.YOUNG, collector.MIDDLE)
        kept = [[i] for i in range(500)]
        gc.collect(1)  # what a middle collection leaves is frozen right after it
        # frozen objects are in no generation; asked of `kept` itself, not of the freeze count, which
        # other threads of this process (servers left by earlier tests) move at any time
        tracked = {id(obj) for obj in gc.get_objects()}
        assert not any(id(item) in tracked for item in kept) and id(kept) not in tracked
        assert gc.get_freeze_count() > len(kept)
        assert gc.get_objects(generation=2) == []  # no collection will walk them again
        with collector.short_pauses():  # nested (two servers in one process): one policy
            assert gc.get_threshold()[:2] == (collector.YOUNG, collector.MIDDLE)
        assert collector._freeze_survivors in gc.callbacks
    assert gc.get_threshold() == before and collector._freeze_survivors not in gc.callbacks
    assert gc.get_freeze_count() == 0


def _registry() -> EpisodeRegistry:
    return EpisodeRegistry(ServerConfig(env_ids=(ECHO,)), Metrics())


def test_a_closed_episode_is_freed_at_once_though_its_state_was_frozen():
    async def main() -> tuple[bool, bool]:
        registry = _registry()
        ep, _ = await registry.create(ECHO, seed=1, env_kwargs={"max_turns": 100}, request_id="c")
        for i in range(40):
            await registry.step(ep.episode_id, call("echo", text=str(i)), request_id=f"s{i}")
        gc.collect(1)  # the episode's env and history are frozen now
        env = weakref.ref(ep.env.unwrapped)
        # frozen: in no generation (asked of the env itself; the shared freeze count moves with
        # whatever other threads of this process allocate)
        frozen = id(ep.env.unwrapped) not in {id(obj) for obj in gc.get_objects()}
        await registry.close(ep.episode_id)
        del ep
        registry.creates.clear()  # the create's remembered answer holds the episode too
        return frozen, env() is None

    with collector.short_pauses():
        frozen, freed = asyncio.run(main())
    assert frozen and freed


def test_the_sweep_frees_a_closed_episode_that_a_failed_step_kept_in_a_cycle():
    """A failed step's error, kept for a retry of its request, is a cycle through its traceback;
    frozen, only the periodic full collection gets it (and the episode it holds) back."""
    async def main() -> weakref.ref:
        registry = _registry()
        ep, _ = await registry.create(ECHO, seed=2)
        await registry.step(ep.episode_id, call("finish", answer="x"), request_id="last")
        try:
            await registry.step(ep.episode_id, call("echo", text="late"), request_id="over")
        except ApiError as exc:
            assert exc.status == 409
        else:
            raise AssertionError("a step after the end must fail")
        gc.collect(1)
        env = weakref.ref(ep.env.unwrapped)
        await registry.close(ep.episode_id)
        return env

    with collector.short_pauses():
        env = asyncio.run(main())
        gc.collect(1)
        assert collector.sweep() > 0
        assert env() is None


def test_a_server_sweeps_on_its_own_loop():
    async def main() -> int:
        async with collector.serving(sweep_every_s=0.01):
            cycle: list = []
            cycle.append(cycle)
            ref = weakref.ref(_Box(cycle))
            gc.collect(1)  # frozen: no ordinary collection would free it
            del cycle
            await asyncio.sleep(0.2)
            return ref() is None

    assert asyncio.run(main())


class _Box:
    """A weak-referenceable object kept alive only by a cycle."""

    def __init__(self, cycle: list) -> None:
        cycle.append(self)
