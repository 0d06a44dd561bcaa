"""Forks and trajectory records over real HTTP: determinism and isolation for Echo-v0, Flights-v0
(its stochastic world, so the RNG stream must carry over) and Search-v0, with both clients and
`RemoteEnv`; forks count against capacity, expire on their own clock, and bad requests get the
typed errors."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator

import gymnasium as gym
import httpx
import pytest
from fork_helpers import Case, call, check_record, play_and_fork, scripted
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentrl  # noqa: F401
from agentrl.client import (
    AsyncEnvClient,
    CapacityError,
    EnvClient,
    EpisodeOverError,
    InvalidRequestError,
    RetryPolicy,
    UnknownEpisodeError,
)
from agentrl.flights.oracle import OraclePolicy
from agentrl.protocol import MAX_FORKS
from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread

ECHO, FLIGHTS, SEARCH = "agentrl/Echo-v0", "agentrl/Flights-v0", "agentrl/Search-v0"
NO_RETRY = RetryPolicy(retries=0)
SMALL_WORLD = {"world_seed": 7, "world_passages": 600}


def _search_script(info: dict) -> list[str]:
    question = info["question"]
    return [f"<search>{question}</search>", f"<search>{question} headquarters</search>",
            "<search>population</search>", "<answer>Ixornford</answer>"]


CASES = {
    "echo": Case(ECHO, seed=3, fork_at=2, detour=call("finish", answer="wrong"), policy=scripted(
        lambda info: [call("echo", text="a"), call("echo", text="b"), call("echo", text="c"),
                      call("finish", answer=info["secret"])])),
    "flights": Case(FLIGHTS, seed=4, fork_at=4, policy=OraclePolicy, env_kwargs={"stochastic": True},
                    detour=call("finish", outcome="refused", message="No.")),
    "search": Case(SEARCH, seed=3, fork_at=2, policy=scripted(_search_script), env_kwargs=SMALL_WORLD,
                   detour="<answer>nowhere</answer>"),
}


@pytest.fixture(scope="module", autouse=True)
def _index_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Search-v0 caches the indexes it builds; keep this module's out of the user's cache."""
    old = os.environ.get("AGENTRL_CACHE")
    os.environ["AGENTRL_CACHE"] = str(tmp_path_factory.mktemp("agentrl-cache"))
    yield
    if old is None:
        os.environ.pop("AGENTRL_CACHE", None)
    else:
        os.environ["AGENTRL_CACHE"] = old


@pytest.fixture(scope="module")
def client(base_url) -> Iterator[EnvClient]:
    with EnvClient(base_url, retry=NO_RETRY) as c:
        yield c


@pytest.mark.parametrize("name", sorted(CASES))
def test_forks_continue_as_the_parent_and_are_isolated(client, name):
    case = CASES[name]
    played = play_and_fork(client, case)
    check_record(client, case, played)
    for eid in (played["parent"], played["same"], played["other"]):
        assert client.close_episode(eid)


@pytest.mark.parametrize("name", sorted(CASES))
def test_async_forks_step_side_by_side_with_their_parent(base_url, name):
    """Parent and three forks take the same next action at the same time: four equal results."""
    case = CASES[name]

    async def main() -> None:
        async with AsyncEnvClient(base_url, retry=NO_RETRY) as aclient:
            first = await aclient.create_episode(case.env_id, seed=case.seed, env_kwargs=case.env_kwargs)
            policy = case.policy()
            observation, info = first.observation, first.info
            for _ in range(case.fork_at):
                result = await aclient.step(first.episode_id, policy(observation, info))
                observation, info = result.observation, result.info
            forks = await aclient.fork_episode(first.episode_id, 3)
            assert len({f.episode_id for f in forks}) == 3
            action = policy(observation, info)
            ids = [first.episode_id, *(f.episode_id for f in forks)]
            results = await asyncio.gather(*(aclient.step(eid, action) for eid in ids))
            assert all(r == results[0] for r in results)
            record = await aclient.trajectory(first.episode_id)
            assert [f["at_step"] for f in record["forks"]] == [case.fork_at] * 3
            assert [s["action"] for s in record["steps"]][-1] == action
            for eid in ids:
                await aclient.close_episode(eid)

    asyncio.run(main())


def test_forks_taken_while_steps_run_see_a_whole_number_of_steps(base_url):
    """Forks asked for between a parent's steps in flight copy the state after some step, never
    during one: each fork's latest observation and record match the parent's at its `turns`."""

    async def main() -> None:
        async with AsyncEnvClient(base_url, retry=NO_RETRY) as aclient:
            first = await aclient.create_episode(ECHO, seed=0, env_kwargs={"max_turns": 100})
            eid = first.episode_id

            async def stepper() -> None:
                for i in range(20):
                    await aclient.step(eid, call("echo", text=f"step {i}"))

            async def forker() -> list:
                made = []
                for _ in range(5):
                    made += await aclient.fork_episode(eid, 2)
                return made

            _, forks = await asyncio.gather(stepper(), forker())
            record = await aclient.trajectory(eid)
            assert len(record["steps"]) == 20 and len(record["forks"]) == len(forks) == 10
            for fork in forks:
                k = fork.turns
                latest = record["steps"][k - 1]["observation"] if k else first.observation
                assert fork.observation == latest
                own = await aclient.trajectory(fork.episode_id)
                assert own["steps"] == record["steps"][:k]
                await aclient.close_episode(fork.episode_id)
            assert sorted(f["at_step"] for f in record["forks"]) == sorted(f.turns for f in forks)
            await aclient.close_episode(eid)

    asyncio.run(main())


def test_remote_env_forks_own_their_episodes(base_url):
    parent = gym.make(ECHO, base_url=base_url).unwrapped
    try:
        _, info = parent.reset(seed=1)
        parent.step(call("echo", text="x"))
        a, b = parent.fork(2)
        try:
            assert len({parent.episode_id, a.episode_id, b.episode_id}) == 3
            assert a.client is not parent.client  # a client of its own: it outlives its parent's
            assert b.step(call("finish", answer="wrong"))[1] == 0.0
            done = a.step(call("finish", answer=info["secret"]))
            assert done[1] == 1.0 and done[2]
            with pytest.raises(EpisodeOverError):
                a.fork()
            observation, reward, terminated, *_ = parent.step(call("echo", text="still here"))
            assert "still here" in observation and not terminated
            gone = a.episode_id
            a.close()
            with pytest.raises(UnknownEpisodeError):
                parent.client.episode_status(gone)
        finally:
            a.close()
            b.close()
    finally:
        parent.close()


def test_a_fork_of_a_fork_is_a_grandchild_in_the_record(client):
    first = client.create_episode(ECHO, seed=0)
    client.step(first.episode_id, call("echo", text="1"))
    (child,) = client.fork_episode(first.episode_id)
    client.step(child.episode_id, call("echo", text="2"))
    (grandchild,) = client.fork_episode(child.episode_id)
    assert grandchild.turns == 2 and grandchild.parent_id == child.episode_id
    client.step(grandchild.episode_id, call("echo", text="3"))
    record = client.trajectory(first.episode_id)
    (fork,) = record["forks"]
    assert fork["at_step"] == 1
    assert [s["action"] for s in fork["trajectory"]["steps"]] == [call("echo", text="2")]
    (inner,) = fork["trajectory"]["forks"]
    assert [s["action"] for s in inner["trajectory"]["steps"]] == [call("echo", text="3")]
    # the watcher's transcript of a fork starts with its parent's steps
    transcript = httpx.get(f"{client.http.base_url}/v1/episodes/{grandchild.episode_id}/transcript").json()
    assert [s["action"] for s in transcript["steps"]] == [call("echo", text=t) for t in "123"]
    for eid in (first.episode_id, child.episode_id, grandchild.episode_id):
        client.close_episode(eid)


def test_bad_forks_get_typed_errors(client, base_url):
    first = client.create_episode(ECHO, seed=0)
    eid = first.episode_id
    with pytest.raises(UnknownEpisodeError, match="never created"):
        client.fork_episode(eid.split(".")[0] + ".nosuch")
    with pytest.raises(UnknownEpisodeError, match="route it by its id"):
        client.fork_episode("elsewhere.abc")
    with pytest.raises(UnknownEpisodeError):
        client.trajectory("elsewhere.abc")
    for n in (0, -1, MAX_FORKS + 1):
        with pytest.raises(InvalidRequestError):
            client.fork_episode(eid, n)
    r = httpx.post(f"{base_url}/v1/episodes/{eid}/fork", json={"n": "two"})
    assert r.status_code == 422 and r.json()["error"] == "invalid_request"
    client.step(eid, call("finish", answer=first.info["secret"]))
    with pytest.raises(EpisodeOverError, match="over"):
        client.fork_episode(eid)
    # a finished episode still has its record; a closed one has neither
    assert client.trajectory(eid)["steps"][-1]["reward"] == 1.0
    client.close_episode(eid)
    with pytest.raises(UnknownEpisodeError):
        client.fork_episode(eid)
    with pytest.raises(UnknownEpisodeError):
        client.trajectory(eid)


def test_a_retried_fork_answers_the_same_forks(base_url, client):
    eid = client.create_episode(ECHO, seed=0).episode_id
    live = httpx.get(f"{base_url}/health").json()["live_episodes"]
    body = {"n": 2, "request_id": "fork-once"}
    first = httpx.post(f"{base_url}/v1/episodes/{eid}/fork", json=body)
    again = httpx.post(f"{base_url}/v1/episodes/{eid}/fork", json=body)
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json()
    assert httpx.get(f"{base_url}/health").json()["live_episodes"] == live + 2
    for made in first.json()["episodes"]:
        client.close_episode(made["episode_id"])
    client.close_episode(eid)


def test_forks_count_against_capacity_all_or_nothing():
    with serve_in_thread(ServerConfig(env_ids=(ECHO,), max_episodes=4)) as url, \
            EnvClient(url, retry=NO_RETRY) as client:
        eid = client.create_episode(ECHO, seed=0).episode_id
        with pytest.raises(CapacityError) as refused:
            client.fork_episode(eid, 4)
        assert refused.value.retry_after is not None
        assert client.health()["live_episodes"] == 1  # nothing was made
        forks = client.fork_episode(eid, 3)
        assert len(forks) == 3 and client.health()["live_episodes"] == 4
        with pytest.raises(CapacityError):
            client.fork_episode(eid, 1)
        with pytest.raises(CapacityError):
            client.create_episode(ECHO, seed=0)
        client.close_episode(eid)  # a parent's close leaves its forks live
        assert client.health()["live_episodes"] == 3
        assert len(client.fork_episode(forks[0].episode_id, 1)) == 1  # room again


def test_forks_expire_on_their_own_idle_clock():
    config = ServerConfig(env_ids=(ECHO,), idle_ttl_s=1.0, reap_interval_s=0.1,
                          env_kwargs={ECHO: {"max_turns": 1000}})
    with serve_in_thread(config) as url, EnvClient(url, retry=NO_RETRY) as client:
        parent = client.create_episode(ECHO, seed=0).episode_id
        idle, busy = (f.episode_id for f in client.fork_episode(parent, 2))
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:  # the parent and one fork stay busy, one fork idles
            client.step(parent, call("echo", text="tick"))
            client.step(busy, call("echo", text="tick"))
            time.sleep(0.2)
        with pytest.raises(UnknownEpisodeError):
            client.fork_episode(idle)
        assert client.episode_status(parent).status == "running"
        # a fork of an idle parent starts its own clock: it outlives the parent
        (young,) = client.fork_episode(busy)
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            client.step(young.episode_id, call("echo", text="tick"))
            time.sleep(0.2)
        with pytest.raises(UnknownEpisodeError):
            client.episode_status(busy)
        assert client.episode_status(young.episode_id).turns > 8


FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@given(body=json_values | st.fixed_dictionaries({"n": json_values}), over=st.booleans())
@FUZZ
def test_fork_with_arbitrary_bodies_never_answers_5xx(base_url, body, over):
    with httpx.Client(base_url=base_url, timeout=30) as http:
        first = http.post("/v1/episodes", json={"env_id": ECHO, "seed": 0}).json()
        eid = first["episode_id"]
        if over:
            http.post(f"/v1/episodes/{eid}/step", json={"action": call("finish", answer="x")})
        r = http.post(f"/v1/episodes/{eid}/fork", json=body)
        assert r.status_code in (201, 409, 422), r.text
        assert r.status_code != 201 or not over
        if r.status_code >= 400:
            assert set(r.json()) == {"error", "message"}
        made = r.json().get("episodes", []) if r.status_code == 201 else []
        for item in made:
            http.delete(f"/v1/episodes/{item['episode_id']}")
        assert http.get(f"/v1/episodes/{eid}/trajectory").status_code == 200
        http.delete(f"/v1/episodes/{eid}")
