"""The one episode driver (`agentrl.driver`): the same policy on the same seed plays the same
episode in-process and over HTTP, sync (`play`) and async (`aplay`), to the same outcome and the
same trajectory record; the driver keeps totals, not a second record; misuse is a clear error."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import gymnasium as gym
import pytest

import agentrl  # noqa: F401  (registers the ids)
from agentrl.client import AsyncEnvClient
from agentrl.core import EpisodeOverError
from agentrl.driver import AsyncEpisode, EnvSource, Episode, Outcome, acontinue, aplay, play
from agentrl.flights.oracle import OraclePolicy
from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread

FLIGHTS = "agentrl/Flights-v0"


@pytest.fixture(scope="module")
def server_url():
    config = ServerConfig(env_kwargs={FLIGHTS: {"privileged_info": True}})
    with serve_in_thread(config) as url:
        yield url


def echo_policy(observation: str, info: dict[str, Any]) -> str:
    word = observation.split("'")[1] if "'" in observation else "?"
    return "<tool_call>" + json.dumps({"name": "echo", "arguments": {"text": word}}) + "</tool_call>"


def summary(outcome: Outcome) -> tuple[Any, ...]:
    return (outcome.observation, outcome.reward, outcome.turns, outcome.terminated, outcome.truncated,
            outcome.last_observation, outcome.info.get("task_id"))


def as_async(policy: Any) -> Any:
    async def act(observation: str, info: dict[str, Any]) -> str | None:
        return policy(observation, info)

    return act


def play_async(source: EnvSource, policy: Any, seed: int) -> tuple[Outcome, dict[str, Any]]:
    async def run() -> tuple[Outcome, dict[str, Any]]:
        client = AsyncEnvClient(source.base_url) if source.base_url else None
        episode = AsyncEpisode(source, client)
        try:
            outcome = await aplay(episode, as_async(policy), seed)
            return outcome, await episode.record()
        finally:
            await episode.close()
            if client is not None:
                await client.aclose()

    return asyncio.run(run())


@pytest.mark.parametrize("seed", [3, 8])
def test_one_episode_plays_alike_in_process_and_over_http_sync_and_async(server_url, seed):
    local = Episode(gym.make(FLIGHTS, privileged_info=True))
    try:
        outcome = play(local, OraclePolicy(), seed)
        record = local.record()
    finally:
        local.close()
    assert outcome.reward == 1.0 and outcome.terminated and outcome.turns == len(record["steps"])
    assert outcome.reward == sum(step["reward"] for step in record["steps"])
    assert outcome.last_observation == record["steps"][-1]["observation"]
    remote = Episode(gym.make(FLIGHTS, base_url=server_url))
    try:
        assert summary(play(remote, OraclePolicy(), seed)) == summary(outcome)
        assert remote.record() == record
    finally:
        remote.close()
    for source in (EnvSource(FLIGHTS, env_kwargs={"privileged_info": True}), EnvSource(FLIGHTS, server_url)):
        played, played_record = play_async(source, OraclePolicy(), seed)
        assert summary(played) == summary(outcome) and played_record == record


def test_a_policy_that_returns_none_stops_the_episode_where_it_is():
    actions = iter([echo_policy, None])

    def policy(observation: str, info: dict[str, Any]) -> str | None:
        act = next(actions)
        return None if act is None else act(observation, info)

    episode = Episode(gym.make("agentrl/Echo-v0"))
    outcome = play(episode, policy, seed=1)
    assert (outcome.turns, outcome.done, episode.done) == (1, False, False)
    assert outcome.env_s > 0 and len(episode.record()["steps"]) == 1
    episode.close()
    assert episode.done
    with pytest.raises(EpisodeOverError):
        episode.step(echo_policy("'x'", {}))


def test_a_step_after_the_episode_ended_is_refused_and_begin_starts_afresh():
    episode = Episode(gym.make("agentrl/Echo-v0", max_turns=2))
    with pytest.raises(EpisodeOverError):
        episode.step("anything")  # nothing begun yet
    outcome = play(episode, echo_policy, seed=2)
    assert outcome.truncated and outcome.turns == 2 and outcome.reward == 0.0
    with pytest.raises(EpisodeOverError):
        episode.step(echo_policy("'x'", {}))
    episode.begin(seed=2)
    assert episode.reward == 0.0 and not episode.done and episode.outcome.turns == 0
    episode.close()


def test_an_async_episode_is_told_its_client_exactly_when_the_env_is_served(server_url):
    with pytest.raises(ValueError, match="exactly when the env is served"):
        AsyncEpisode(EnvSource("agentrl/Echo-v0", server_url))

    async def record_before_begin() -> None:
        episode = AsyncEpisode(EnvSource("agentrl/Echo-v0"))
        with pytest.raises(EpisodeOverError):
            await episode.record()
        await episode.close()

    asyncio.run(record_before_begin())


@pytest.mark.parametrize("served", [False, True])
def test_a_forked_async_episode_plays_on_as_its_parent_would(server_url, served):
    source = EnvSource("agentrl/Echo-v0", server_url if served else None, env_kwargs={"max_turns": 3})

    async def run() -> tuple[list[Outcome], list[dict[str, Any]]]:
        client = AsyncEnvClient(server_url) if served else None
        parent = AsyncEpisode(source, client)
        stop_after_one = iter([True, False])

        async def once(observation: str, info: dict[str, Any]) -> str | None:
            return echo_policy(observation, info) if next(stop_after_one) else None

        episodes = [parent]
        try:
            await aplay(parent, once, seed=4)
            episodes += await parent.fork(2)
            assert [f.outcome.turns for f in episodes] == [1, 1, 1] and not any(f.done for f in episodes)
            outcomes = [await acontinue(e, as_async(echo_policy)) for e in episodes]
            return outcomes, [await e.record() for e in episodes]
        finally:
            for e in episodes:
                await e.close()
            if client is not None:
                live = (await client.health())["live_episodes"]
                await client.aclose()
                assert live == 0

    outcomes, records = asyncio.run(run())
    assert all(o.truncated and o.turns == 3 for o in outcomes)
    ends = {(o.reward, o.last_observation, json.dumps(o.last_info, sort_keys=True)) for o in outcomes}
    assert len(ends) == 1  # the same state hash too
    assert all(r["steps"] == records[0]["steps"] for r in records[1:]), records
