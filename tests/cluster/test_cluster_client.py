"""One client for one server or many: episodes routed by id over real server processes, and a lost
holder's episodes replayed into another with the same observations."""

from __future__ import annotations

import asyncio
import time

import gymnasium as gym
import httpx
import pytest
from cluster_helpers import ECHO, FLIGHTS

import agentrl  # noqa: F401  (registers the env ids)
from agentrl.client import AsyncEnvClient, EnvClient, UnknownEpisodeError
from agentrl.client.cluster import EpisodeLostError
from agentrl.core import tool_call as call
from agentrl.protocol import EpisodeEndedError

pytestmark = pytest.mark.slow


def actions(env_id: str, seed: int, steps: int) -> list[str]:
    """A fixed script per episode: tool calls, a malformed one, plain text."""
    if env_id == ECHO:
        pool = [call("echo", text=f"{seed}-{i}") for i in range(4)] + ["no call here"]
    else:
        pool = [call("search_flights", origin="JFK", destination="LAX", date="2025-03-0" + str(seed % 9 + 1)),
                call("search_flights", origin="SFO", destination="ORD", date="2025-04-11"),
                "<tool_call>{not json</tool_call>", "thinking out loud"]
    return [pool[(seed + i) % len(pool)] for i in range(steps)]


def local_observations(env_id: str, seed: int, steps: int) -> list[str]:
    """The observations the same episode gives in-process: what every replay must match."""
    env = gym.make(env_id).unwrapped
    try:
        out = [env.reset(seed=seed)[0]]
        for action in actions(env_id, seed, steps):
            observation, _, terminated, truncated, _ = env.step(action)
            out.append(observation)
            if terminated or truncated:
                break
        return out
    finally:
        env.close()


def holder_of(episode_id: str) -> str:
    return episode_id.partition(".")[0]


def test_episodes_spread_over_holders_and_calls_go_to_their_holder(cluster):
    cluster.ensure_up(2)
    with EnvClient(cluster.discovery) as client:
        made = [client.create_episode(ECHO, seed=i) for i in range(6)]
        up = {h["holder"] for h in cluster.holders() if h["state"] == "up"}
        assert {holder_of(m.episode_id) for m in made} == up
        for m in made:
            result = client.step(m.episode_id, call("echo", text="hi"))
            assert "hi" in result.observation
            assert client.episode_status(m.episode_id).episode_id == m.episode_id
            assert client.close_episode(m.episode_id)
        assert client.cluster.router.recipes == {}
        assert [e.env_id for e in client.list_envs()] == [ECHO, FLIGHTS]


def test_creates_in_flight_together_spread_over_holders(cluster):
    up = {h["holder"] for h in cluster.ensure_up(2)}

    async def main():
        async with AsyncEnvClient(cluster.discovery) as client:
            made = await asyncio.gather(*(client.create_episode(ECHO, seed=i) for i in range(8)))
            await asyncio.gather(*(client.close_episode(m.episode_id) for m in made))
        return [holder_of(m.episode_id) for m in made]

    holders = asyncio.run(main())
    assert {h: holders.count(h) for h in up} == {h: 4 for h in up}


def test_an_episode_id_of_a_holder_that_never_existed_is_a_clear_404(cluster):
    with EnvClient(cluster.discovery) as client:
        client.create_episode(ECHO, seed=1)  # the map is read
        began = time.monotonic()
        with pytest.raises(UnknownEpisodeError) as raised:
            client.step("nowhere-9.0123abcd", "hi")
        assert time.monotonic() - began < 5
        assert raised.value.status == 404 and "'nowhere-9'" in raised.value.message
        assert not isinstance(raised.value, EpisodeLostError)


def test_the_front_address_does_not_route_episodes(cluster):
    r = httpx.post(f"{cluster.url}/v1/episodes", json={"env_id": ECHO})
    assert r.status_code == 404


async def _run_episode(client, env_id, seed, steps, started: asyncio.Event, round_done):
    created = await client.create_episode(env_id, seed=seed)
    seen = [created.observation]
    started.set()
    for i, action in enumerate(actions(env_id, seed, steps)):
        await round_done(i)
        result = await client.step(created.episode_id, action)
        seen.append(result.observation)
        if result.terminated or result.truncated:
            break
    await client.close_episode(created.episode_id)
    return env_id, seed, seen


def test_a_killed_holder_loses_no_episode_with_steps_in_flight(cluster):
    """64 Echo and Flights episodes step in rounds; a holder is SIGKILLed while round 3's steps are
    in flight; every episode ends with the observations it would have had in-process."""
    cluster.ensure_up(2)
    steps, n = 6, 32
    specs = [(ECHO if i % 2 else FLIGHTS, 100 + i) for i in range(n)]

    async def main():
        client = AsyncEnvClient(cluster.discovery)
        started = asyncio.Event()
        rounds = [asyncio.Event() for _ in range(steps)]
        arrived = [0] * steps
        killed = asyncio.Event()

        async def round_done(i):
            arrived[i] += 1
            if arrived[i] == n:
                rounds[i].set()
            if i >= 1:  # everyone finishes round i-1 before round i starts: the kill lands mid-round
                await rounds[i - 1].wait()
            if i >= 4:  # round 3 may be over by the time the kill lands; round 4 surely meets it
                await killed.wait()

        tasks = [asyncio.create_task(_run_episode(client, e, s, steps, started, round_done))
                 for e, s in specs]
        await rounds[2].wait()
        victim = holder_of(next(iter(client.cluster.router.recipes)))
        await asyncio.sleep(0.005)  # round 3's steps are on the wire
        cluster.kill_holder(victim)
        killed.set()
        done = await asyncio.wait_for(asyncio.gather(*tasks), timeout=240)
        stats = client.cluster.stats
        await client.aclose()
        return done, stats, victim

    done, stats, victim = asyncio.run(main())
    for env_id, seed, seen in done:
        assert seen == local_observations(env_id, seed, steps), (env_id, seed)
    assert stats.episodes >= 1 and stats.lost == 0
    assert stats.steps >= stats.episodes * 2
    # the holders that took the replays counted them
    counted = 0.0
    for holder in cluster.holders():
        if holder["holder"] != victim:
            text = httpx.get(f"{holder['url']}/metrics").text
            counted += sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                           if line.startswith("agentrl_episodes_replayed_total{"))
    assert counted >= stats.episodes


def test_a_stale_holder_map_still_creates_and_steps(cluster):
    """The client's map says a holder is up after it died: creates and steps go elsewhere."""
    cluster.ensure_up(2)
    with EnvClient(cluster.discovery) as client:
        first = client.create_episode(ECHO, seed=7)
        before = client.step(first.episode_id, call("echo", text="a"))
        victim = holder_of(first.episode_id)
        cluster.kill_holder(victim)
        assert client.cluster.router.map[victim].state == "up"  # the map is stale
        made = [client.create_episode(ECHO, seed=i) for i in range(4)]
        assert all(holder_of(m.episode_id) != victim for m in made)
        after = client.step(first.episode_id, call("echo", text="b"))
    local = gym.make(ECHO).unwrapped
    local.reset(seed=7)
    assert before.observation == local.step(call("echo", text="a"))[0]
    assert after.observation == local.step(call("echo", text="b"))[0]


def test_a_replay_that_answers_differently_raises_episode_lost(cluster):
    """Where a replayed step answers otherwise than before (as a Bash-v0 step reading the clock
    would), the call raises EpisodeLostError naming the step, and the episode is forgotten. The
    steps are replayed in one batch: the one named is the one that differs, not the batch's first."""
    cluster.ensure_up(2)
    with EnvClient(cluster.discovery) as client:
        made = client.create_episode(ECHO, seed=3)
        for text in ("x", "y", "z"):
            client.step(made.episode_id, call("echo", text=text))
        recipe = client.cluster.router.recipes[made.episode_id]
        *head, (_, *rest) = recipe.ops[1]
        recipe.ops[1] = (*head, (b"another answer", *rest))  # what a container would change
        cluster.kill_holder(holder_of(made.episode_id))
        with pytest.raises(EpisodeLostError) as raised:
            client.step(made.episode_id, call("echo", text="w"))
        assert "step 2 ('<tool_call>" in raised.value.reason and ECHO in raised.value.reason
        assert made.episode_id not in client.cluster.router.recipes
        assert client.cluster.stats.lost == 1


def test_remote_env_over_a_cluster_survives_its_holder(cluster):
    cluster.ensure_up(2)
    env = gym.make(FLIGHTS, base_url=cluster.discovery)
    try:
        seen = [env.reset(seed=11)[0]]
        script = actions(FLIGHTS, 11, 4)
        seen.append(env.step(script[0])[0])
        seen.append(env.step(script[1])[0])
        cluster.kill_holder(holder_of(env.unwrapped.episode_id))
        seen.append(env.step(script[2])[0])
        seen.append(env.step(script[3])[0])
        assert seen == local_observations(FLIGHTS, 11, 4)
        assert env.unwrapped.client.cluster.stats.episodes == 1
    finally:
        env.close()


def test_a_replay_whose_info_differs_raises_episode_lost_naming_the_info(cluster):
    """The observation, reward and end flags alike, but another `info` (a holder with another task-id
    key would answer another `task_id`): the replay is refused, its reason names the info."""
    cluster.ensure_up(2)
    with EnvClient(cluster.discovery) as client:
        made = client.create_episode(FLIGHTS, seed=4)
        client.step(made.episode_id, actions(FLIGHTS, 4, 1)[0])
        recipe = client.cluster.router.recipes[made.episode_id]
        *head, (observation, _info, *rest) = recipe.ops[0]
        recipe.ops[0] = (*head, (observation, b"another info", *rest))
        cluster.kill_holder(holder_of(made.episode_id))
        with pytest.raises(EpisodeLostError) as raised:
            client.step(made.episode_id, actions(FLIGHTS, 4, 2)[1])
        assert "step 1" in raised.value.reason and "differently (info;" in raised.value.reason


def test_options_the_caller_changes_after_the_create_change_no_replay(cluster):
    """The recipe holds copies: a caller that reuses its options dict for the next episode still gets
    the first episode replayed as it was made."""
    cluster.ensure_up(2)
    options = {"family": "cheapest"}
    with EnvClient(cluster.discovery) as client:
        made = client.create_episode(FLIGHTS, seed=12, options=options)
        options["family"] = "budget"  # the next episode's, say
        script = actions(FLIGHTS, 12, 2)
        first = client.step(made.episode_id, script[0])
        cluster.kill_holder(holder_of(made.episode_id))
        second = client.step(made.episode_id, script[1])
        assert client.cluster.stats.episodes == 1
    local = gym.make(FLIGHTS).unwrapped
    local.reset(seed=12, options={"family": "cheapest"})
    assert [first.observation, second.observation] == [local.step(a)[0] for a in script]
    local.close()


def test_an_episode_closed_by_another_client_stays_closed(cluster):
    """Closed through another connection to its holder (the cluster has no token, so any caller may):
    the owner's next call raises `EpisodeEndedError` ("episode_closed") instead of silently making
    the episode again."""
    cluster.ensure_up(2)
    with EnvClient(cluster.discovery) as client:
        made = client.create_episode(ECHO, seed=5)
        client.step(made.episode_id, call("echo", text="a"))
        url = client.cluster.router.map[holder_of(made.episode_id)].url
        with EnvClient(url) as other:
            assert other.close_episode(made.episode_id) is True
        with pytest.raises(EpisodeEndedError) as raised:
            client.step(made.episode_id, call("echo", text="b"))
        assert raised.value.code == "episode_closed"
        assert made.episode_id not in client.cluster.router.recipes
        assert client.cluster.stats.episodes == 0  # nothing was replayed
