"""`agentrl serve --ray`: the holders of a cluster as Ray actors, spread over Ray's nodes.

Each holder is a named Ray actor (`agentrl-holder-<n>` in the `agentrl` namespace: Ray's registry
is where it is registered) that runs the unchanged server app on a port of its own node, bound to
the node's address as Ray knows it, and answers its URL. The process running `agentrl serve --ray`
is a Ray driver serving the cluster's address (`agentrl.server.cluster.pool.cluster_app`): a client outside
Ray finds the holders there as for `--processes`, and talks to them directly. Placement, resources
and the actors' lifetimes are Ray's: the actors die with the driver, a holder costs `num_cpus` of
Ray's CPUs (one by default: a server process uses one core), and `SPREAD` places them over the nodes.
An actor that dies is reported `down` (clients replay its episodes elsewhere); `agentrl cluster add`
starts new ones. With `--ray-sandboxes` every node also runs a sandbox server, which the Bash-v0 and
Code-v0 episodes of that node's holders use (`agentrl.server.cluster.ray_sandboxes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

import ray
import ray.exceptions

from agentrl.server.cluster.pool import Holder, HolderPool
from agentrl.server.config import ServerConfig, is_loopback
from agentrl.server.local import free_port

NAMESPACE = "agentrl"
START_TIMEOUT_S = 180.0


class HolderActor:
    """One holder: the server app on a free port of this node, in a thread of the actor's process."""

    def __init__(self, config: ServerConfig, log_level: str, sandbox_url: str | None = None) -> None:
        import uvicorn

        from agentrl.server.local import _uvicorn_config

        if sandbox_url is not None:  # Bash-v0/Code-v0 use this node's sandbox server
            from agentrl.server.cluster.ray_sandboxes import near_env

            config = near_env(config, sandbox_url, config.resolved_token())
        host = config.host if not is_loopback(config.host) else ray.util.get_node_ip_address()
        self.config = replace(config, host=host, port=free_port(host))
        self.config.check()  # a node's non-loopback address needs a token
        self.server = uvicorn.Server(_uvicorn_config(self.config, log_level))
        self.thread = threading.Thread(target=self.server.run, name="agentrl-server", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the agentrl server of holder {config.holder} did not start")
            time.sleep(0.01)

    def url(self) -> str:
        return f"http://{self.config.host}:{self.config.port}"

    def pid(self) -> int:
        return os.getpid()

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def stop(self) -> None:
        """Close every episode and stop serving (the actor is killed after)."""
        self.server.should_exit = True
        self.thread.join(timeout=30)


@dataclass
class _Actor:
    handle: Any
    ping: Any = None  # a pending `url` call: ready and failed means the actor is gone


class RayPool(HolderPool):
    """Holders as named Ray actors of the cluster this driver is connected to."""

    def __init__(self, config: ServerConfig, log_level: str = "warning", num_cpus: float = 1.0,
                 sandboxes: Any = None, sandbox_url: str | None = None) -> None:
        super().__init__(config.resolved_token(), config.resolved_operator_token())
        self.sandboxes = sandboxes  # `ray_sandboxes.NodeSandboxes`, or None: envs run their own Docker
        self.sandbox_url = sandbox_url
        self.config = config
        self.log_level = log_level
        self.num_cpus = num_cpus
        self.base_name = config.resolved_holder()
        self._made = 0
        self._remote = ray.remote(HolderActor)

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
            ).remote(replace(self.config, holder=name), self.log_level, self.sandbox_url)
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
    with `sandboxes`, one sandbox server per node too (`agentrl.server.cluster.ray_sandboxes`)."""
    import uvicorn

    from agentrl.cluster.serving import uvicorn_config
    from agentrl.server.cluster.pool import cluster_app

    config.check()
    # a Ray started here has no dashboard; one joined (`address`) is configured as it was started
    ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, configure_logging=False,
             include_dashboard=None if address else False)  # None: Ray's default
    node_sandboxes = None
    try:
        pool = RayPool(config, log_level, num_cpus)
        if sandboxes:
            from agentrl.sandbox_server.cluster.discovery import CLUSTER_PATH
            from agentrl.server.cluster.ray_sandboxes import SANDBOX_PATH, NodeSandboxes, add_sandbox_map

            node_sandboxes = pool.sandboxes = NodeSandboxes(config.resolved_token(), config.host,
                                                            log_level=log_level)
            host = config.host if config.host not in ("0.0.0.0", "::") else ray.util.get_node_ip_address()
            pool.sandbox_url = f"http://{host}:{config.port}{SANDBOX_PATH}{CLUSTER_PATH}"
        app = cluster_app(pool, holders, config.resolved_token(), config.resolved_operator_token())
        if node_sandboxes is not None:
            add_sandbox_map(app, node_sandboxes)
        uvicorn.Server(uvicorn_config(app, host=config.host, port=config.port, log_level=log_level)).run()
    finally:
        if node_sandboxes is not None:
            node_sandboxes.stop()
        ray.shutdown()
