"""Faults beyond a kill, each with what is promised (docs/cluster.md, "What is promised under each
fault"): a holder that hangs (SIGSTOP) for a call and past its health checks, one that answers late,
and the cluster's address unreachable for a while, for a client that knows the map and for a new one."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import httpx
import pytest
from cluster_helpers import ECHO, ServedCluster, answers
from support import free_port

import agentrl  # noqa: F401  (registers the env ids)
from agentrl.client import AsyncEnvClient, EnvClient
from agentrl.client import cluster as cluster_client
from agentrl.client.cluster import ClusterUnreachableError

pytestmark = pytest.mark.slow
TIMEOUT_S = 5.0  # the client's timeout: what a hung holder costs a call (room for a loaded machine)


def echo(text: str) -> str:
    return '<tool_call>{"name": "echo", "arguments": {"text": "' + text + '"}}</tool_call>'


@pytest.fixture(scope="module")
def cluster() -> Iterator[ServedCluster]:
    made = ServedCluster("processes", 2, (ECHO,))
    try:
        made.wait_up(2)
        yield made
    finally:
        made.stop()


def local(seed: int, texts: list[str]) -> list[str]:
    env = gym.make(ECHO).unwrapped
    env.reset(seed=seed)
    return [env.step(echo(t))[0] for t in texts]


def test_a_hung_holder_costs_one_timeout_then_its_episode_is_replayed_elsewhere(cluster):
    """SIGSTOP: the holder still listens (the kernel accepts connections) but answers nothing. The
    call waits the client's timeout once (a timed-out holder is not tried again), the episode is
    replayed on another holder, and the call answers as the episode would have; the map still calls
    the hung holder up. Once the holder runs again (SIGCONT) and works off the step it held, the
    episode goes on where the caller saw it: that step was applied once to it, not twice."""
    cluster.ensure_up(2)
    with EnvClient(cluster.discovery, timeout=TIMEOUT_S) as client:
        made = client.create_episode(ECHO, seed=21)
        seen = [client.step(made.episode_id, echo("a")).observation]
        victim = made.episode_id.partition(".")[0]
        victim_url = client.cluster.router.map[victim].url
        pid = cluster.holder_pid(victim)
        os.kill(pid, signal.SIGSTOP)
        try:
            began = time.monotonic()
            seen.append(client.step(made.episode_id, echo("b")).observation)
            took = time.monotonic() - began
            assert client.cluster.router.recipes[made.episode_id].holder != victim
            assert client.cluster.stats.episodes == 1 and client.cluster.stats.lost == 0
            assert next(h for h in cluster.holders() if h["holder"] == victim)["state"] == "up"
        finally:
            os.kill(pid, signal.SIGCONT)
        deadline = time.monotonic() + 30
        while not answers(victim_url):  # the resumed holder has worked off what it held
            assert time.monotonic() < deadline, f"{victim} does not answer after SIGCONT"
            time.sleep(0.05)
        seen.append(client.step(made.episode_id, echo("c")).observation)
        assert client.episode_status(made.episode_id).turns == 3
        assert len(client.trajectory(made.episode_id)["steps"]) == 3
        assert client.cluster.stats.episodes == 1  # the resumed holder took nothing back
        client.close_episode(made.episode_id)
    assert seen == local(21, ["a", "b", "c"])
    assert TIMEOUT_S <= took < 2 * TIMEOUT_S


def test_a_hung_holder_is_unresponsive_in_the_map_takes_no_create_and_comes_back_up(cluster):
    """A holder that misses `MISSES_UNRESPONSIVE` health checks in a row while its process runs
    (SIGSTOP) is `unresponsive` in the map, so new episodes go to the holders that answer (no create
    waits on it, none is replayed); once it runs again (SIGCONT) it is `up` at its next health check
    and takes creates again."""
    cluster.ensure_up(2)

    def state_of(holder: str) -> Callable[[list[dict[str, Any]]], str | None]:
        return lambda hs: next(h["state"] for h in hs if h["holder"] == holder)

    victim = cluster.holders()[0]["holder"]
    pid = cluster.holder_pid(victim)
    os.kill(pid, signal.SIGSTOP)
    try:
        cluster.wait(lambda hs: state_of(victim)(hs) == "unresponsive", 60, f"{victim} unresponsive")
        with EnvClient(cluster.discovery, timeout=TIMEOUT_S) as client:
            began = time.monotonic()
            made = [client.create_episode(ECHO, seed=61 + i) for i in range(4)]
            took = time.monotonic() - began
            assert {m.episode_id.partition(".")[0] for m in made} == {h["holder"] for h in cluster.holders()
                                                                      if h["state"] == "up"} - {victim}
            assert client.cluster.stats.episodes == 0 and took < TIMEOUT_S  # no create waited on it
            for m in made:
                client.close_episode(m.episode_id)
    finally:
        os.kill(pid, signal.SIGCONT)
    cluster.wait(lambda hs: state_of(victim)(hs) == "up", 60, f"{victim} up again")
    with EnvClient(cluster.discovery, timeout=TIMEOUT_S) as client:
        made = [client.create_episode(ECHO, seed=71 + i) for i in range(2)]
        assert victim in {m.episode_id.partition(".")[0] for m in made}  # fewest of the client's: spread
        for m in made:
            client.close_episode(m.episode_id)


def test_a_client_that_knows_the_map_carries_on_while_the_cluster_address_is_unreachable(cluster):
    """The address serves only the map: with it stopped (SIGSTOP), live episodes step on, straight
    to their holders, and a create whose read of the map is due pays one timeout on that read, then
    is made on a holder of the map already known; the failed read is counted."""
    cluster.ensure_up(2)
    with EnvClient(cluster.discovery, timeout=TIMEOUT_S) as client:
        made = [client.create_episode(ECHO, seed=s) for s in (31, 32)]
        cluster.proc.send_signal(signal.SIGSTOP)
        try:
            seen = [client.step(m.episode_id, echo("c")).observation for m in made]
            client.cluster.router.read_at = -1e9  # as after REFRESH_S: the next create reads the map
            began = time.monotonic()
            late = client.create_episode(ECHO, seed=33)
            took = time.monotonic() - began
            seen.append(client.step(late.episode_id, echo("c")).observation)
            assert client.cluster.stats.map_misses == 1
            assert isinstance(client.cluster.router.map_error, httpx.ReadTimeout)
        finally:
            cluster.proc.send_signal(signal.SIGCONT)
        client.cluster.router.read_at = -1e9
        assert client.create_episode(ECHO, seed=34).episode_id  # the address back: read again
        assert client.cluster.router.map_error is None and client.cluster.stats.map_misses == 1
    assert seen == [local(s, ["c"])[0] for s in (31, 32, 33)]
    assert TIMEOUT_S <= took < 2 * TIMEOUT_S


def test_a_new_client_retries_a_stopped_cluster_address_then_says_it_cannot_reach_it(cluster, monkeypatch):
    """A client with no map tries the address again for `DISCOVERY_WAIT_S`: one that comes back in
    time is read; one that does not is a `ClusterUnreachableError` naming the URL and what failed,
    within the wait and one timeout."""
    cluster.ensure_up(2)
    monkeypatch.setattr(cluster_client, "DISCOVERY_WAIT_S", 2.0)
    resume = threading.Timer(1.5, cluster.proc.send_signal, (signal.SIGCONT,))
    cluster.proc.send_signal(signal.SIGSTOP)
    try:
        with EnvClient(cluster.discovery, timeout=1.0) as client:
            began = time.monotonic()
            with pytest.raises(ClusterUnreachableError) as raised:
                client.create_episode(ECHO, seed=51)
            took = time.monotonic() - began
        assert cluster.discovery in str(raised.value) and "ReadTimeout" in str(raised.value)
        assert 2.0 - 1.0 <= took < 2.0 + 1.0 + 2.0  # the wait, less the last try's time, plus it and slack
        monkeypatch.setattr(cluster_client, "DISCOVERY_WAIT_S", 20.0)
        resume.start()
        with EnvClient(cluster.discovery, timeout=1.0) as client:
            began = time.monotonic()
            made = client.create_episode(ECHO, seed=52)  # read once the address is back
            took = time.monotonic() - began
            assert client.step(made.episode_id, echo("e")).observation == local(52, ["e"])[0]
    finally:
        resume.cancel()
        cluster.proc.send_signal(signal.SIGCONT)
    assert 1.0 <= took < 20.0  # the timer started just before the clock


def test_a_cluster_address_nobody_listens_on_is_named_after_the_wait(monkeypatch):
    """Refused at once on every try (sync and async clients): the error comes after the wait, not
    the first refusal, and names the URL and the failed connect (the async client's aiohttp
    transport reports a refusal as a `ConnectTimeout`)."""
    url = f"http://127.0.0.1:{free_port()}/v1/cluster"
    wait = 1.5
    monkeypatch.setattr(cluster_client, "DISCOVERY_WAIT_S", wait)

    async def async_create():
        async with AsyncEnvClient(url, timeout=1.0) as client:
            await client.create_episode(ECHO, seed=1)

    for create in (lambda: EnvClient(url, timeout=1.0).create_episode(ECHO, seed=1),
                   lambda: asyncio.run(async_create())):
        began = time.monotonic()
        with pytest.raises(ClusterUnreachableError) as raised:
            create()
        took = time.monotonic() - began
        assert url in str(raised.value) and "Connect" in str(raised.value)
        assert isinstance(raised.value.__cause__, httpx.ConnectError | httpx.ConnectTimeout)
        assert wait - 0.9 <= took < wait + 5.0  # the last pause (0.8 s) may not fit in the wait


def test_a_slow_holder_within_the_timeout_keeps_its_episode(cluster):
    """A holder that answers late (stopped for a second, under the client's timeout) is waited for:
    the call answers from the same holder, nothing is replayed, and the episode goes on as it would
    have: only latency."""
    cluster.ensure_up(2)
    with EnvClient(cluster.discovery, timeout=TIMEOUT_S) as client:
        made = client.create_episode(ECHO, seed=41)
        holder = made.episode_id.partition(".")[0]
        pid = cluster.holder_pid(holder)
        os.kill(pid, signal.SIGSTOP)
        resume = threading.Timer(1.0, os.kill, (pid, signal.SIGCONT))
        began = time.monotonic()  # before the timer starts: the holder is stopped for 1 s from here on
        resume.start()
        try:
            seen = client.step(made.episode_id, echo("d")).observation
            took = time.monotonic() - began
        finally:
            resume.join()
            os.kill(pid, signal.SIGCONT)
        later = client.step(made.episode_id, echo("e")).observation
        assert client.cluster.router.recipes[made.episode_id].holder == holder
        assert client.cluster.stats.episodes == 0 and client.cluster.stats.map_misses == 0
        assert client.episode_status(made.episode_id).turns == 2
        client.close_episode(made.episode_id)
    assert [seen, later] == local(41, ["d", "e"])
    assert 1.0 <= took < TIMEOUT_S
