"""Steps of light envs run on the event loop itself (`EpisodeRegistry.step_now`), with the same
guarantees as the general path: order within an episode, idempotent request ids, errors in place."""

from __future__ import annotations

import asyncio
import json

from server_helpers import ECHO, call

from agentrl.protocol import BatchItem
from agentrl.server.config import ServerConfig
from agentrl.server.dispatch import PackedExecutor
from agentrl.server.episodes import EpisodeRegistry
from agentrl.server.metrics import Metrics

KIND = f"{ECHO}:step"
LONG = {"max_turns": 10**6}  # no episode ends while tested


async def _registry_with(episodes: int) -> tuple[EpisodeRegistry, list[str]]:
    registry = EpisodeRegistry(ServerConfig(env_ids=(ECHO,)), Metrics())
    registry.start()
    registry.dispatch.inline_below_s = 0.05  # Echo's steps are inline even on a very busy machine
    ids = [(await registry.create(ECHO, seed=s, env_kwargs=LONG))[0].episode_id for s in range(episodes)]
    for _ in range(400):  # the first steps measure the kind's cost; a busy machine may need more
        await registry.step_many([BatchItem(episode_id=ids[0], action=call("echo", text="warm"))])
        if registry.dispatch.inline(KIND):
            break
    assert registry.dispatch.inline(KIND)
    return registry, ids


def _turns(parts: list[bytes]) -> list[int]:
    return [json.loads(p)["result"]["info"]["turn"] for p in parts]


def test_cheap_steps_run_on_the_loop_without_the_dispatcher():
    async def main():
        registry, ids = await _registry_with(4)
        start = registry.episodes[ids[1]].turns

        def no_threads(*args):
            raise AssertionError("an inline step went through the dispatcher")

        dispatch_run = registry.dispatch.run
        registry.dispatch.run = no_threads  # type: ignore[method-assign]
        items = [BatchItem(episode_id=ids[1 + i % 3], action=call("echo", text=str(i))) for i in range(30)]
        parts = await registry.step_many(items)
        registry.dispatch.run = dispatch_run  # type: ignore[method-assign]  # closing goes through it
        await registry.shutdown()
        return start, parts

    start, parts = asyncio.run(main())
    assert [json.loads(p)["status"] for p in parts] == [200] * 30
    assert _turns(parts)[::3] == list(range(start + 1, start + 11))  # one episode's steps, in order
    assert all(f'\\"{i}\\"'.encode() in p for i, p in enumerate(parts))


def test_a_step_that_must_wait_keeps_its_episodes_later_steps_behind_it():
    async def main():
        registry, (a, b) = await _registry_with(2)
        ep_a, ep_b = registry.episodes[a], registry.episodes[b]
        before = ep_a.turns, ep_b.turns
        await ep_a.lock.acquire()  # as if a step of `a` were running
        items = [BatchItem(episode_id=a, action=call("echo", text="a1")),
                 BatchItem(episode_id=b, action=call("echo", text="b1")),
                 BatchItem(episode_id=a, action=call("echo", text="a2"))]
        batch = asyncio.get_running_loop().create_task(registry.step_many(items))
        await asyncio.sleep(0.05)
        while_held = ep_a.turns, ep_b.turns
        ep_a.lock.release()
        parts = await batch
        await registry.shutdown()
        return before, while_held, parts

    before, while_held, parts = asyncio.run(main())
    assert while_held == (before[0], before[1] + 1)  # `b` ran at once; `a` waited for its lock
    assert _turns(parts) == [before[0] + 1, before[1] + 1, before[0] + 2]
    assert b'"a1' in parts[0] and b'"a2' in parts[2]


def test_a_retried_request_gets_its_first_result_and_does_not_step_again():
    async def main():
        registry, (a,) = await _registry_with(1)
        item = BatchItem(episode_id=a, action=call("echo", text="once"), request_id="r-1")
        first = await registry.step_many([item])
        turns = registry.episodes[a].turns
        again = await registry.step_many([item, item])
        await registry.shutdown()
        return first, again, turns, registry

    first, again, turns, _ = asyncio.run(main())
    assert again == first * 2 and _turns(first) == [turns]


def test_an_env_raising_on_the_loop_is_an_error_in_place():
    async def main():
        registry, (a, b) = await _registry_with(2)

        def broken(action):
            raise ValueError("boom")

        registry.episodes[a].env.step = broken
        parts = await registry.step_many([BatchItem(episode_id=a, action="x", request_id="r"),
                                          BatchItem(episode_id=b, action=call("echo", text="fine")),
                                          BatchItem(episode_id=a, action="x", request_id="r")])
        await registry.shutdown()
        return parts

    broken, fine, retried = (json.loads(p) for p in asyncio.run(main()))
    assert broken["status"] == 500 and broken["error"]["error"] == "env_error"
    assert "ValueError: boom" in broken["error"]["message"] and retried == broken
    assert fine["status"] == 200


def test_a_kind_run_on_the_loop_that_grows_slow_goes_back_to_the_threads():
    ex = PackedExecutor(workers=2)
    for _ in range(20):
        ex.ran_inline("k", 0.0001)
    assert ex.inline("k")
    for _ in range(40):
        ex.ran_inline("k", 0.005)
    assert not ex.inline("k")
    ex.shutdown()
