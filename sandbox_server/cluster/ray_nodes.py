"""One sandbox server per Ray node, each an actor pinned to its node: what `agentrl serve --ray
--ray-sandboxes` runs for the Bash-v0 and Code-v0 episodes of each node.

Commands run in containers of a Docker engine, and the engine a worker can reach cheaply is its own
node's. So the driver starts one sandbox server on every node (the serving kit's Ray actor,
`agentrl.serving.ray_actor.AppActor`, pinned there by `NodeAffinitySchedulingStrategy`, hard, named
`agentrl-sandbox-<holder>` in the `agentrl` namespace, taking no Ray CPU: its containers use the
node's cores, not Ray's slots), with its own Docker backend whose sandbox ids start with its holder
name, `node-<node id>`. Only nodes offering the custom resource `docker` get one when any node
offers it (`ray start --resources '{"docker": 1}'`); otherwise every node does. Nodes that join
later get a server when `ensure` is next called.

`NodeSandboxes.snapshot` is their map, in the shape `agentrl sandbox serve --processes` serves at
`/v1/cluster`; a client prefers the server its process names in `AGENTRL_SANDBOX_NEAR` (its own
node's) while that one is up, and replays a lost server's sandboxes into another's
(`agentrl.sandbox_server.clients.cluster`). Where the map is served and who is told the near
server is the env server's business (`agentrl.server.cluster.ray_pool`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from typing import Any

import httpx
import ray
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from agentrl.sandbox_server.cluster.discovery import SandboxClusterMap, SandboxHolderInfo
from agentrl.serving.ray_actor import NAMESPACE, START_TIMEOUT_S, ActorApp, AppActor
from agentrl.serving.runner import is_loopback, uvicorn_config


def holder_name(node_id: str) -> str:
    """The sandbox holder of a node: its name heads the sandbox ids it makes."""
    return f"node-{node_id[:16]}"


def sandbox_app(holder: str, token: str | None, pool_size: int, max_sandboxes: int, log_level: str,
                host: str, port: int) -> ActorApp:
    """Run in a node's actor: the unchanged sandbox app over a Docker backend of its own, whose
    sandbox ids start with `holder`; its containers are removed when the actor stops."""
    from agentrl.sandbox_server.api.app import create_app
    from agentrl.sandbox_server.sandboxes.docker_backend import DockerBackend

    if not is_loopback(host) and not token:
        raise ValueError(f"a sandbox server on {host} (not loopback) needs a token")
    backend = DockerBackend(pool_size=pool_size, max_sandboxes=max_sandboxes)
    backend.id_prefix = holder + "."
    app = create_app(backend, token=token)
    return ActorApp(uvicorn_config(app, host=host, port=port, log_level=log_level), close=backend.close)


class NodeSandboxes:
    """The sandbox servers of the Ray cluster this driver is connected to, one per node."""

    def __init__(self, token: str | None, host: str = "127.0.0.1", pool_size: int = 2,
                 max_sandboxes: int = 256, log_level: str = "warning") -> None:
        self.token, self.host = token, host
        self.pool_size, self.max_sandboxes, self.log_level = pool_size, max_sandboxes, log_level
        self.servers: dict[str, tuple[Any, str]] = {}  # holder -> (actor, url)
        self._remote = ray.remote(AppActor)

    def ensure(self) -> None:
        """A sandbox server on every alive node that should have one and has none yet."""
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        if any(n.get("Resources", {}).get("docker") for n in nodes):
            nodes = [n for n in nodes if n.get("Resources", {}).get("docker")]
        made = []
        for node in nodes:
            holder = holder_name(node["NodeID"])
            if holder in self.servers:
                continue
            actor = self._remote.options(  # type: ignore[attr-defined]  # an actor class has it; ray's stubs miss it
                name=f"agentrl-sandbox-{holder}", namespace=NAMESPACE, num_cpus=0, max_restarts=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
            ).remote(functools.partial(sandbox_app, holder, self.token, self.pool_size, self.max_sandboxes,
                                       self.log_level), self.host, f"the sandbox server {holder}")
            made.append((holder, actor))
        urls = ray.get([actor.url.remote() for _, actor in made], timeout=START_TIMEOUT_S)
        for (holder, actor), url in zip(made, urls, strict=True):
            self.servers[holder] = (actor, url)

    async def snapshot(self) -> SandboxClusterMap:
        """Every server, `up` where its `/health` answers now, with its open sandboxes."""
        async def info(http: httpx.AsyncClient, holder: str, url: str) -> SandboxHolderInfo:
            try:
                health = (await http.get(f"{url}/health")).json()
            except (httpx.HTTPError, ValueError):
                return SandboxHolderInfo(holder=holder, url=url, state="down")
            return SandboxHolderInfo(holder=holder, url=url, state="up",
                                     live_sandboxes=int(health.get("live_sandboxes", 0)))

        async with httpx.AsyncClient(timeout=2.0) as http:  # read seldom: each client every few seconds
            holders = await asyncio.gather(*(info(http, h, url) for h, (_, url) in self.servers.items()))
        return SandboxClusterMap(holders=list(holders))

    def stop(self) -> None:
        for actor, _ in self.servers.values():
            with contextlib.suppress(RayError):  # already gone: the kill is all there is
                ray.get(actor.stop.remote(), timeout=60)
            ray.kill(actor)
