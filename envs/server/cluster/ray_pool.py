"""`agentrl serve --ray`: the holders of a cluster as Ray actors, spread over Ray's nodes.

Each holder is a named Ray actor (`agentrl-holder-<n>` in the `agentrl` namespace: Ray's registry
is where it is registered) that runs the unchanged server app on a port of its own node, bound to
the node's address as Ray knows it, and answers its URL. The process running `agentrl serve --ray`
is a Ray driver serving the cluster's address (`agentrl.server.cluster.pool.cluster_app`): a client outside
Ray finds the holders there as for `--processes`, and talks to them directly. Placement, resources
and the actors' lifetimes are Ray's: the actors die with the driver, a holder costs `num_cpus` of
Ray's CPUs (one by default: a server process uses one core), and `SPREAD` places them over the nodes.
An actor that dies is reported `down` (clients replay its episodes elsewhere); `agentrl cluster add`
starts new ones. The actor is the serving kit's (`agentrl.serving.ray_actor.AppActor`, as the
sandbox servers' below); what it serves is `holder_app`.

With `--ray-sandboxes` every node also runs a sandbox server (`agentrl.sandbox_server.cluster.ray_nodes`),
which the Bash-v0 and Code-v0 episodes of that node's holders use: the cluster's address serves their
map at `/sandboxes/v1/cluster`, and every holder gives Bash-v0 and Code-v0
`sandbox_url=<address>/sandboxes/v1/cluster` and names its own node's server as the one to prefer
(`AGENTRL_SANDBOX_NEAR` in its process, read by `SandboxCluster`): each episode's sandbox is on its
own node while that server is up, and replayed into another node's when it is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from dataclasses import dataclass, replace
from typing import Any

import ray
import ray.exceptions

from agentrl.sandbox_server.cluster.discovery import CLUSTER_PATH, NEAR_ENV_VAR, SandboxClusterMap
from agentrl.sandbox_server.cluster.ray_nodes import NodeSandboxes, holder_name
from agentrl.server.cluster.pool import Holder, HolderPool, cluster_app
from agentrl.server.config import ServerConfig
from agentrl.serving.ray_actor import NAMESPACE, START_TIMEOUT_S, ActorApp, AppActor
from agentrl.serving.runner import run_server

SANDBOX_PATH = "/sandboxes"  # base of the sandbox map on the cluster's address
SANDBOX_ENVS = ("agentrl/Bash-v0", "agentrl/Code-v0")


def holder_app(config: ServerConfig, log_level: str, sandbox_url: str | None, host: str,
               port: int) -> ActorApp:
    """Run in a holder's actor: the server app of `config` on `host`:`port`, its Bash-v0 and Code-v0
    given this node's sandbox server where the cluster runs them (`sandbox_url`)."""
    from agentrl.server.local import _uvicorn_config

    if sandbox_url is not None:
        config = near_env(config, sandbox_url, config.resolved_token())
    config = replace(config, host=host, port=port)
    config.check()  # a node's non-loopback address needs a token
    return ActorApp(_uvicorn_config(config, log_level))


def near_env(config: ServerConfig, sandbox_url: str, token: str | None) -> ServerConfig:
    """Run in a holder's actor: its config with Bash-v0 and Code-v0 given the cluster's sandbox map
    (operator settings already given win), and this process told its node's sandbox server."""
    os.environ[NEAR_ENV_VAR] = holder_name(ray.get_runtime_context().get_node_id())
    env_kwargs = dict(config.env_kwargs)
    for env_id in SANDBOX_ENVS:
        if config.env_ids is None or env_id in config.env_ids:
            given = {"sandbox_url": sandbox_url, **({"sandbox_token": token} if token else {})}
            env_kwargs[env_id] = {**given, **env_kwargs.get(env_id, {})}
    return replace(config, env_kwargs=env_kwargs)


@dataclass
class _Actor:
    handle: Any
    ping: Any = None  # a pending `url` call: ready and failed means the actor is gone


class RayPool(HolderPool):
    """Holders as named Ray actors of the cluster this driver is connected to."""

    def __init__(self, config: ServerConfig, log_level: str = "warning", num_cpus: float = 1.0,
                 sandboxes: Any = None, sandbox_url: str | None = None) -> None:
        super().__init__(config.resolved_token(), config.resolved_operator_token())
        self.sandboxes = sandboxes  # `ray_nodes.NodeSandboxes`, or None: envs run their own Docker
        self.sandbox_url = sandbox_url
        self.config = config
        self.log_level = log_level
        self.num_cpus = num_cpus
        self.base_name = config.resolved_holder()
        self._made = 0
        self._remote = ray.remote(AppActor)

    async def _launch(self, count: int) -> list[Holder]:
        if self.sandboxes is not None:  # first a sandbox server on every node, new ones included
            await asyncio.to_thread(self.sandboxes.ensure)
        actors = []
        for _ in range(count):
            name = f"{self.base_name}-r{self._made}"
            self._made += 1
            handle = self._remote.options(  # type: ignore[attr-defined]  # ray.remote adds it
                name=f"agentrl-holder-{name}", namespace=NAMESPACE, num_cpus=self.num_cpus,
                scheduling_strategy="SPREAD", max_restarts=0, runtime_env={"env_vars": self.holder_env},
            ).remote(functools.partial(holder_app, replace(self.config, holder=name), self.log_level,
                                       self.sandbox_url),
                     self.config.host, f"the agentrl server of holder {name}")
            actors.append((name, handle))
        urls = await asyncio.to_thread(ray.get, [h.url.remote() for _, h in actors], timeout=START_TIMEOUT_S)
        return [Holder(name, url, handle=_Actor(handle))
                for (name, handle), url in zip(actors, urls, strict=True)]

    def _running(self, holder: Holder) -> bool:
        actor: _Actor = holder.handle
        if actor.ping is not None:
            ready, _ = ray.wait([actor.ping], timeout=0)
            if not ready:
                return True
            try:
                ray.get(actor.ping)
            except ray.exceptions.RayError:
                return False
        actor.ping = actor.handle.url.remote()
        return True

    async def _retire(self, holder: Holder) -> None:
        handle = holder.handle.handle
        with contextlib.suppress(ray.exceptions.RayError):  # already gone: the kill below is all there is
            await asyncio.to_thread(ray.get, handle.stop.remote(), timeout=60)
        ray.kill(handle)


def run_ray(config: ServerConfig, holders: int, address: str | None, num_cpus: float,
            log_level: str = "warning", sandboxes: bool = False) -> None:
    """Serve the cluster's address in the foreground with `holders` actors until SIGINT/SIGTERM;
    with `sandboxes`, one sandbox server per node too, their map served at `/sandboxes/v1/cluster`."""
    config.check()
    # a Ray started here has no dashboard; one joined (`address`) is configured as it was started
    ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, configure_logging=False,
             include_dashboard=None if address else False)  # None: Ray's default
    node_sandboxes = None
    try:
        pool = RayPool(config, log_level, num_cpus)
        if sandboxes:
            node_sandboxes = pool.sandboxes = NodeSandboxes(config.resolved_token(), config.host,
                                                            log_level=log_level)
            host = config.host if config.host not in ("0.0.0.0", "::") else ray.util.get_node_ip_address()
            pool.sandbox_url = f"http://{host}:{config.port}{SANDBOX_PATH}{CLUSTER_PATH}"
        app = cluster_app(pool, holders, config.resolved_token(), config.resolved_operator_token())
        if node_sandboxes is not None:
            add_sandbox_map(app, node_sandboxes)
        run_server(app, host=config.host, port=config.port, log_level=log_level)
    finally:
        if node_sandboxes is not None:
            node_sandboxes.stop()
        ray.shutdown()


def add_sandbox_map(app: Any, sandboxes: NodeSandboxes) -> None:
    """`GET /sandboxes/v1/cluster` on the cluster's address (its auth, as every route there)."""
    from fastapi.responses import Response

    @app.get(SANDBOX_PATH + CLUSTER_PATH, response_model=SandboxClusterMap)
    async def sandbox_map() -> Response:
        return Response((await sandboxes.snapshot()).model_dump_json(), media_type="application/json")
