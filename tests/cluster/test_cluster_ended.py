"""An ended episode stays ended behind a cluster address, whatever its holder forgets: a cluster client
does not replay an episode that may have expired by its own clocks (a holder that forgot it, by its
memory's bound or by a restart, answers it as unknown), and a holder restarted with its state
directory still answers as closed an episode the operator closed, which the operator can do through
the cluster's address.

Holders are servers on loopback ports in threads of the test process behind `cluster_app` over a
`StaticPool` (as `agentrl cluster serve` runs it), restarted on the same port under the same name,
and the holders of `agentrl serve --processes`, restarted by their supervisor."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from cluster_helpers import ECHO, ServedCluster, answers
from support import AppServer, free_port

from agentrl.client import EnvClient, EpisodeEndedError, UnknownEpisodeError
from agentrl.server.cluster.pool import StaticPool, cluster_app
from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread

pytestmark = pytest.mark.slow
TOKEN, OPERATOR = "ended-token", "ended-operator"
ECHO_HI = '<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>'


@contextmanager
def front(name: str, url: str, token: str | None = None, operator: str | None = None) -> Iterator[str]:
    """The discovery URL of a cluster address over the one holder `name` at `url`."""
    with AppServer(cluster_app(StaticPool({name: url}, token), 1, token, operator)) as served:
        yield f"{served.url}/v1/cluster"


def wait_up(discovery: str, token: str | None = None) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    deadline = time.monotonic() + 30
    while {h["state"] for h in httpx.get(discovery, headers=headers).json()["holders"]} != {"up"}:
        assert time.monotonic() < deadline, "the holder is not up"
        time.sleep(0.05)


def live(url: str) -> int:
    return httpx.get(f"{url}/health").json()["live_episodes"]


def test_an_expired_episode_is_not_replayed_whatever_its_holder_forgot():
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = ServerConfig(port=port, env_ids=(ECHO,), ui=False, holder="h0", idle_ttl_s=0.5,
                          reap_interval_s=0.05, ended_memory=2)
    with front("h0", url) as discovery, EnvClient(discovery) as client:
        with serve_in_thread(config):
            wait_up(discovery)
            ids = [client.create_episode(ECHO, seed=seed).episode_id for seed in range(3)]
            deadline = time.monotonic() + 30
            while live(url):  # all three expire; the holder's memory of two forgets the first
                assert time.monotonic() < deadline
                time.sleep(0.05)
            with pytest.raises(EpisodeEndedError) as refused:  # its holder forgot: the client's clocks tell
                client.step(ids[0], ECHO_HI)
            assert refused.value.code == "episode_expired" and "not replayed" in refused.value.message
            with pytest.raises(EpisodeEndedError) as told:  # its holder remembers: the holder's answer
                client.step(ids[2], ECHO_HI)
            assert told.value.code == "episode_expired" and "not replayed" not in told.value.message
            assert live(url) == 0  # nothing was re-created
        with serve_in_thread(config):  # restarted without a state directory: it forgot them all
            wait_up(discovery)
            with pytest.raises(EpisodeEndedError) as refused:
                client.step(ids[1], ECHO_HI)
            assert refused.value.code == "episode_expired" and "idle" in refused.value.message
            assert live(url) == 0
        stats = client.cluster.stats
        assert (stats.episodes, stats.ended) == (0, 2) and not client.cluster.router.recipes


def test_an_episode_the_operator_closed_stays_closed_across_its_holders_restart(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = ServerConfig(port=port, token=TOKEN, operator_token=OPERATOR, env_ids=(ECHO,), ui=False,
                          holder="h1", state_dir=str(tmp_path))
    with front("h1", url, TOKEN, OPERATOR) as discovery, EnvClient(discovery, token=TOKEN) as client, \
            EnvClient(discovery, token=OPERATOR) as operator:
        with serve_in_thread(config):
            wait_up(discovery, OPERATOR)  # the operator reads the map at the cluster's address
            eid = client.create_episode(ECHO, seed=1).episode_id
            assert "hi" in client.step(eid, ECHO_HI).observation
            assert operator.close_episode(eid) is True  # through the address: another client's episode
        with serve_in_thread(config):  # the same holder, restarted with its state directory
            wait_up(discovery, TOKEN)
            with pytest.raises(EpisodeEndedError) as raised:
                client.step(eid, ECHO_HI)
            assert raised.value.code == "episode_closed"
            assert live(url) == 0  # not replayed
            with EnvClient(discovery, token=TOKEN) as other, pytest.raises(UnknownEpisodeError) as unknown:
                other.step(eid, ECHO_HI)
            assert unknown.value.code == "unknown_episode"  # not told that it existed


def test_a_holder_its_supervisor_restarts_still_knows_what_was_closed():
    """`agentrl serve --processes` gives its holders a state directory of its run where none is given."""
    made = ServedCluster("processes", 1, (ECHO,), ("--token", TOKEN, "--operator-token", OPERATOR))
    made.headers = {"Authorization": f"Bearer {OPERATOR}"}
    try:
        (holder,) = made.wait_up(1)
        with EnvClient(made.discovery, token=TOKEN) as client, \
                EnvClient(made.discovery, token=OPERATOR) as operator:
            eid = client.create_episode(ECHO, seed=1).episode_id
            assert operator.close_episode(eid) is True
            made.kill_holder(holder["holder"])
            made.wait(lambda hs: answers(holder["url"]) and hs[0]["state"] == "up",
                      what="the holder started again")
            with pytest.raises(EpisodeEndedError) as raised:
                client.step(eid, ECHO_HI)
            assert raised.value.code == "episode_closed"
            assert live(holder["url"]) == 0 and client.cluster.stats.episodes == 0  # nothing replayed
    finally:
        made.stop()
    assert "restarting it" in made.proc.stderr.read()
