"""`agentrl serve --ray --ray-sandboxes`: one sandbox server per Ray node, used by the envs of that node.

Bash-v0 and Code-v0 run their commands in containers of a Docker engine, and the engine a worker
can reach cheaply is its own node's. So the driver starts one sandbox server on every node (an
actor pinned there by `NodeAffinitySchedulingStrategy`, hard, named `agentrl-sandbox-<holder>` in
the `agentrl` namespace, taking no Ray CPU: its containers use the node's cores, not Ray's slots),
with its own Docker backend whose sandbox ids start with its holder name, `node-<node id>`. Only
nodes offering the custom resource `docker` get one when any node offers it (`ray start
--resources '{"docker": 1}'`); otherwise every node does.

The cluster's address serves their map at `/sandboxes/v1/cluster` (the shape `agentrl sandbox
serve --processes` serves at `/v1/cluster`), and every env-server actor gives Bash-v0 and Code-v0
`sandbox_url=<address>/sandboxes/v1/cluster` and names its own node's server as the one to prefer
(`AGENTRL_SANDBOX_NEAR` in its process, read by `SandboxCluster`): each episode's sandbox is on its
own node while that server is up, and when it is lost the sandbox is replayed into another node's
(`agentrl.sandbox_server.clients.cluster`). Nodes that join later get a server when holders are next added.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from typing import Any

import httpx
import ray
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from agentrl.sandbox_server.cluster.discovery import (
    CLUSTER_PATH,
    NEAR_ENV_VAR,
    SandboxClusterMap,
    SandboxHolderInfo,
)
from agentrl.server.config import is_loopback
from agentrl.server.local import free_port

NAMESPACE = "agentrl"
SANDBOX_PATH = "/sandboxes"  # base of the sandbox map on the cluster's address
SANDBOX_ENVS = ("agentrl/Bash-v0", "agentrl/Code-v0")
START_TIMEOUT_S = 180.0


def holder_name(node_id: str) -> str:
    """The sandbox holder of a node: its name heads the sandbox ids it makes."""
    return f"node-{node_id[:16]}"


class SandboxServerActor:
    """The sandbox server of one node: the unchanged app over a Docker backend, on a free port of
    the node, in a thread of the actor's process."""

    def __init__(self, holder: str, host: str, token: str | None, pool_size: int, max_sandboxes: int,
                 log_level: str) -> None:
        import uvicorn

        from agentrl.cluster.serving import uvicorn_config
        from agentrl.sandbox_server.api.app import create_app
        from agentrl.sandbox_server.sandboxes.docker_backend import DockerBackend

        self.host = host if not is_loopback(host) else ray.util.get_node_ip_address()
        if not is_loopback(self.host) and not token:
            raise ValueError(f"a sandbox server on {self.host} (not loopback) needs a token")
        self.port = free_port(self.host)
        self.backend = DockerBackend(pool_size=pool_size, max_sandboxes=max_sandboxes)
        self.backend.id_prefix = holder + "."
        app = create_app(self.backend, token=token)
        self.server = uvicorn.Server(uvicorn_config(app, host=self.host, port=self.port, log_level=log_level))
        self.thread = threading.Thread(target=self.server.run, name="agentrl-sandbox-server", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the sandbox server {holder} did not start")
            time.sleep(0.01)

    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def pid(self) -> int:
        return os.getpid()

    def stop(self) -> None:
        """Stop serving and remove every container (the actor is killed after)."""
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.backend.close()


class NodeSandboxes:
    """The sandbox servers of the Ray cluster this driver is connected to, one per node."""

    def __init__(self, token: str | None, host: str = "127.0.0.1", pool_size: int = 2,
                 max_sandboxes: int = 256, log_level: str = "warning") -> None:
        self.token, self.host = token, host
        self.pool_size, self.max_sandboxes, self.log_level = pool_size, max_sandboxes, log_level
        self.servers: dict[str, tuple[Any, str]] = {}  # holder -> (actor, url)
        self._remote = ray.remote(SandboxServerActor)

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
            ).remote(holder, self.host, self.token, self.pool_size, self.max_sandboxes, self.log_level)
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


def near_env(config: Any, sandbox_url: str, token: str | None) -> Any:
    """Run in an env-server actor: its config with Bash-v0 and Code-v0 given the cluster's sandbox
    map (operator settings already given win), and this process told its node's server."""
    from dataclasses import replace

    os.environ[NEAR_ENV_VAR] = holder_name(ray.get_runtime_context().get_node_id())
    env_kwargs = dict(config.env_kwargs)
    for env_id in SANDBOX_ENVS:
        if config.env_ids is None or env_id in config.env_ids:
            given = {"sandbox_url": sandbox_url, **({"sandbox_token": token} if token else {})}
            env_kwargs[env_id] = {**given, **env_kwargs.get(env_id, {})}
    return replace(config, env_kwargs=env_kwargs)


def add_sandbox_map(app: Any, sandboxes: NodeSandboxes) -> None:
    """`GET /sandboxes/v1/cluster` on the cluster's address (its auth, as every route there)."""
    from fastapi.responses import Response

    @app.get(SANDBOX_PATH + CLUSTER_PATH, response_model=SandboxClusterMap)
    async def sandbox_map() -> Response:
        return Response((await sandboxes.snapshot()).model_dump_json(), media_type="application/json")
