"""Faults beyond a kill, each with what is promised (docs/cluster.md, "What is promised under each
fault"): a holder that hangs (SIGSTOP), one that answers late, and the cluster's address
unreachable for a while."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import gymnasium as gym
import pytest
from cluster_helpers import ECHO, ServedCluster

import agentrl  # noqa: F401  (registers the env ids)
from agentrl.client import EnvClient

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
    call waits the client's timeout, the episode is replayed on another holder, and the call answers
    as the episode would have; the map still calls the hung holder up."""
    cluster.ensure_up(2)
    with EnvClient(cluster.discovery, timeout=TIMEOUT_S) as client:
        made = client.create_episode(ECHO, seed=21)
        before = client.step(made.episode_id, echo("a")).observation
        victim = made.episode_id.partition(".")[0]
        pid = cluster.holder_pid(victim)
        os.kill(pid, signal.SIGSTOP)
        try:
            began = time.monotonic()
            after = client.step(made.episode_id, echo("b")).observation
            took = time.monotonic() - began
            assert client.cluster.router.recipes[made.episode_id].holder != victim
            assert client.cluster.stats.episodes == 1 and client.cluster.stats.lost == 0
            assert next(h for h in cluster.holders() if h["holder"] == victim)["state"] == "up"
        finally:
            os.kill(pid, signal.SIGCONT)
        client.close_episode(made.episode_id)
    assert [before, after] == local(21, ["a", "b"])
    assert TIMEOUT_S <= took < TIMEOUT_S + 30


def test_episodes_step_on_while_the_cluster_address_is_unreachable(cluster):
    """The address serves only the map: with it stopped (SIGSTOP), live episodes step on, straight
    to their holders; a create that must read the map waits the client's timeout and raises."""
    cluster.ensure_up(2)
    with EnvClient(cluster.discovery, timeout=TIMEOUT_S) as client:
        made = [client.create_episode(ECHO, seed=s) for s in (31, 32)]
        cluster.proc.send_signal(signal.SIGSTOP)
        try:
            seen = [client.step(m.episode_id, echo("c")).observation for m in made]
            client.cluster.router.read_at = -1e9  # as after REFRESH_S: the next create reads the map
            with pytest.raises(Exception) as raised:
                client.create_episode(ECHO, seed=33)
            assert "Timeout" in type(raised.value).__name__
        finally:
            cluster.proc.send_signal(signal.SIGCONT)
        assert client.create_episode(ECHO, seed=33).episode_id  # the address back: creates again
    assert seen == [local(31, ["c"])[0], local(32, ["c"])[0]]


def test_a_slow_holder_within_the_timeout_keeps_its_episode(cluster):
    """A holder that answers late (stopped for a second, under the client's timeout) is waited for:
    the call answers from the same holder and nothing is replayed."""
    cluster.ensure_up(2)
    with EnvClient(cluster.discovery, timeout=TIMEOUT_S) as client:
        made = client.create_episode(ECHO, seed=41)
        holder = made.episode_id.partition(".")[0]
        pid = cluster.holder_pid(holder)
        os.kill(pid, signal.SIGSTOP)
        resume = threading.Timer(1.0, os.kill, (pid, signal.SIGCONT))
        resume.start()
        try:
            began = time.monotonic()
            seen = client.step(made.episode_id, echo("d")).observation
            took = time.monotonic() - began
        finally:
            resume.join()
            os.kill(pid, signal.SIGCONT)
        assert client.cluster.router.recipes[made.episode_id].holder == holder
        assert client.cluster.stats.episodes == 0
        client.close_episode(made.episode_id)
    assert seen == local(41, ["d"])[0]
    assert 1.0 <= took < TIMEOUT_S
