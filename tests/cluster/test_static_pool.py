"""`agentrl cluster serve`: discovery for servers run by something else (a StatefulSet's pods)."""

from __future__ import annotations

import time

import httpx
from cluster_helpers import ECHO
from support import AppServer

from agentrl.client import EnvClient
from agentrl.server.cluster.pool import StaticPool, cluster_app
from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread


def test_static_holders_are_listed_watched_and_used():
    with serve_in_thread(ServerConfig(env_ids=(ECHO,), holder="pod-0", ui=False)) as a, \
            serve_in_thread(ServerConfig(env_ids=(ECHO,), holder="pod-1", ui=False)) as b:
        pool = StaticPool({"pod-0": a, "pod-1": b})
        with AppServer(cluster_app(pool, 2, None)) as front:
            discovery = f"{front.url}/v1/cluster"
            deadline = time.monotonic() + 30
            while {h["state"] for h in httpx.get(discovery).json()["holders"]} != {"up"}:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            with EnvClient(discovery) as client:
                made = [client.create_episode(ECHO, seed=i) for i in range(4)]
                holders = sorted(m.episode_id.partition(".")[0] for m in made)
                assert holders == ["pod-0", "pod-0", "pod-1", "pod-1"]
            refused = httpx.post(f"{discovery}/holders", json={"n": 1})
            assert refused.status_code == 409 and "StatefulSet" in refused.json()["message"]
            drained = httpx.post(f"{discovery}/holders/pod-1/drain").json()
            assert drained["state"] == "draining"
