"""`agentrl serve --ray --ray-sandboxes` on a real two-node Ray cluster on loopback (both nodes share
this machine's Docker engine): one sandbox server per node, each env server's Bash-v0 episodes on
its own node's sandbox server, and a node's sandbox server killed: its episodes' sandboxes are
replayed into the other node's, with the same observations."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from cluster_helpers import RAY_ENV, START_TIMEOUT_S, ServedCluster, kill_listener, need_docker, need_ray
from support import free_port

from agentrl.client import EnvClient
from agentrl.core import tool_call as call

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.ray]
BASH = "agentrl/Bash-v0"


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[object]:
    """Two Ray nodes of one CPU each, so that the two env-server actors land one on each."""
    os.environ.update(RAY_ENV)
    need_ray()
    need_docker()
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, namespace="agentrl", log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


class RayServed(ServedCluster):
    """`agentrl serve --ray --ray-sandboxes` joined to a running Ray cluster."""

    def __init__(self, address: str) -> None:
        self.kind = "ray"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.discovery = f"{self.url}/v1/cluster"
        args = [sys.executable, "-m", "agentrl", "serve", "--ray", "--ray-address", address,
                "--processes", "2", "--ray-cpus", "1", "--ray-sandboxes", "--port", str(self.port),
                "--no-ui", "--env", BASH, "--env-kwargs", f'{BASH}={{"command_timeout_s": 10}}']
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, **RAY_ENV})

    def sandbox_servers(self) -> dict[str, dict]:
        holders = httpx.get(f"{self.url}/sandboxes/v1/cluster", timeout=10).json()["holders"]
        return {h["holder"]: h for h in holders}


def test_bash_episodes_use_their_node_s_sandbox_server_and_survive_it(two_nodes):
    import ray

    from agentrl.sandbox_server.cluster.ray_nodes import holder_name

    served = RayServed(two_nodes.address)
    try:
        holders = served.wait_up(2)
        servers = served.sandbox_servers()
        assert len(servers) == 2 and all(s["state"] == "up" for s in servers.values())
        node_of = {h["holder"]: ray.get(ray.get_actor(f"agentrl-holder-{h['holder']}").node_id.remote(),
                                        timeout=START_TIMEOUT_S) for h in holders}
        assert len(set(node_of.values())) == 2  # one env server per node
        episodes = {}
        for holder in holders:
            with EnvClient(holder["url"]) as client:
                before = served.sandbox_servers()
                made = client.create_episode(BASH, seed=3, options={"family": "count_files"})
                mark = call("execute_bash", command="mkdir -p s && export MARK=m-" + holder["holder"])
                client.step(made.episode_id, mark)
                after = served.sandbox_servers()
                near = holder_name(node_of[holder["holder"]])
                grew = {n for n in after if after[n]["live_sandboxes"] > before[n]["live_sandboxes"]}
                assert grew == {near}, (near, before, after)
                episodes[holder["holder"]] = made.episode_id
        # the first node's sandbox server dies: its episode's sandbox is replayed on the other node's
        first = holders[0]
        near = holder_name(node_of[first["holder"]])
        other = next(name for name in servers if name != near)
        kill_listener(servers[near]["url"])
        with EnvClient(first["url"]) as client:
            out = client.step(episodes[first["holder"]], call("execute_bash", command="echo $MARK; ls -d s"))
            assert f"m-{first['holder']}\\ns" in out.observation, out.observation
            assert served.sandbox_servers()[other]["live_sandboxes"] == 2  # its own episode's and this one
            client.close_episode(episodes[first["holder"]])
        with EnvClient(holders[1]["url"]) as client:
            client.close_episode(episodes[holders[1]["holder"]])
    finally:
        served.stop()
