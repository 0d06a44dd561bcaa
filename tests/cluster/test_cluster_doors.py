"""The cluster's doors: its map, scale-up and drain refuse a caller without the token and open to the
operator's token, and a holder that answers a replay otherwise than the episode's own holder did is
refused, not carried on.

A server off loopback must have a token (`ServerConfig.check`, tested in tests/server); these tests
bind loopback only, with a token required, as an address served off loopback is."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from cluster_helpers import ECHO, ServedCluster, ServedHolders, kill_listener
from support import free_port

from agentrl.client import EnvClient
from agentrl.client.cluster import EpisodeLostError

pytestmark = pytest.mark.slow
TOKEN = "doors-token"
OPERATOR = "doors-operator"
ECHO_HI = '<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>'


def test_map_add_and_drain_need_the_token():
    made = ServedCluster("processes", 1, (ECHO,), ("--token", TOKEN))
    made.headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        (holder,) = made.wait_up(1)
        drain = f"{made.discovery}/holders/{holder['holder']}/drain"
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            assert httpx.get(made.discovery, headers=headers).status_code == 401
            assert httpx.post(f"{made.discovery}/holders", json={"n": 1}, headers=headers).status_code == 401
            assert httpx.post(drain, headers=headers).status_code == 401
            # a holder is as locked as the address that lists it
            assert httpx.post(f"{holder['url']}/v1/episodes", json={"env_id": ECHO},
                              headers=headers).status_code == 401
        assert made.holders() == [{**holder, "live_episodes": 0}]  # nothing added, nothing drained
        with EnvClient(made.discovery, token=TOKEN) as client:
            created = client.create_episode(ECHO, seed=1)
            assert "hi" in client.step(created.episode_id, ECHO_HI).observation
        assert httpx.post(drain, headers=made.headers).json()["state"] == "draining"
    finally:
        made.stop()


def test_the_operator_token_opens_the_cluster_address():
    """The operator reads the map and drives a cluster client at the address, as on each holder."""
    made = ServedCluster("processes", 1, (ECHO,), ("--token", TOKEN, "--operator-token", OPERATOR))
    made.headers = {"Authorization": f"Bearer {OPERATOR}"}
    try:
        (holder,) = made.wait_up(1)
        assert holder["state"] == "up"
        with EnvClient(made.discovery, token=TOKEN) as client, \
                EnvClient(made.discovery, token=OPERATOR) as operator:
            theirs = client.create_episode(ECHO, seed=1).episode_id
            mine = operator.create_episode(ECHO, seed=2).episode_id
            assert "hi" in operator.step(theirs, ECHO_HI).observation  # the operator reaches any episode
            assert "hi" in operator.step(mine, ECHO_HI).observation
            assert operator.close_episode(theirs) is True
    finally:
        made.stop()


class LyingCluster(ServedHolders):
    """`agentrl cluster serve` over two holders of Echo-v0: `honest`, and `liar`, whose episodes end
    after one turn (its operator set `max_turns`), so it answers a replayed first step truncated."""

    def __init__(self) -> None:
        self.servers = []
        urls = {}
        for name, kwargs in (("honest", {}), ("liar", {"max_turns": 1})):
            port = free_port()
            urls[name] = f"http://127.0.0.1:{port}"
            self.servers.append(subprocess.Popen(
                [sys.executable, "-m", "agentrl", "serve", "--port", str(port), "--holder", name, "--no-ui",
                 "--env", ECHO, "--env-kwargs", f"{ECHO}={json.dumps(kwargs)}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        port = free_port()
        self.discovery = f"http://127.0.0.1:{port}/v1/cluster"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentrl", "cluster", "serve", "--port", str(port),
             *(arg for name, url in urls.items() for arg in ("--holder", f"{name}={url}"))],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def stop(self) -> None:
        super().stop()
        for server in self.servers:
            server.kill()
            server.wait()


def test_a_holder_that_answers_a_replay_differently_is_refused():
    cluster = LyingCluster()
    try:
        holders = cluster.wait(lambda hs: hs if sum(h["state"] == "up" for h in hs) == 2 else None)
        with EnvClient(cluster.discovery) as client:
            made = [client.create_episode(ECHO, seed=s) for s in (5, 6)]  # one on each holder
            (honest,) = [m for m in made if m.episode_id.startswith("honest.")]
            first = client.step(honest.episode_id, ECHO_HI)
            assert not first.truncated
            kill_listener(next(h["url"] for h in holders if h["holder"] == "honest"))
            with pytest.raises(EpisodeLostError) as raised:  # replayed on the liar, whose step 1 differs
                client.step(honest.episode_id, ECHO_HI)
            assert "step 1" in raised.value.reason and ECHO in raised.value.reason
            assert raised.value.episode_id == honest.episode_id
            assert honest.episode_id not in client.cluster.router.recipes
            assert client.cluster.stats.lost == 1 and client.cluster.stats.episodes == 0
            liar_url = next(h["url"] for h in holders if h["holder"] == "liar")
            assert httpx.get(f"{liar_url}/health").json()["live_episodes"] == 1  # the replay was closed
    finally:
        cluster.stop()
