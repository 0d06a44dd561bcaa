"""A Ray actor that serves one ASGI app on a port of its node: what a holder on Ray is, whatever it serves.

The env server (`agentrl serve --ray`: its holders) and the sandbox server (one per Ray node, for
`--ray-sandboxes`) run their unchanged apps this way: in a thread of the actor's process
(`runner.ServerThread`), on a free port of the node, bound to the node's address as Ray knows it
where the server was asked for loopback (a holder on another node must be reachable from the
driver and the clients). What is served is the server's business: `make(host, port)`, a function
of the server run in the actor, builds the app's uvicorn config there (so that the app, its
backend and its environment are made in the actor's process, not pickled from the driver) and
says what stopping it must close besides.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ray

from agentrl.serving.children import free_port
from agentrl.serving.runner import ServerThread, is_loopback

NAMESPACE = "agentrl"  # the Ray namespace of every agentrl actor (`ray.get_actor(name, NAMESPACE)`)
START_TIMEOUT_S = 180.0  # for an actor's server to start, and for the driver to hear its URL


@dataclass
class ActorApp:
    """What an `AppActor` serves: the app's uvicorn config (`runner.uvicorn_config`), and what to
    close once it stopped serving (a backend's containers), if anything."""

    config: Any
    close: Callable[[], None] | None = None


class AppActor:
    """One server as a Ray actor (`ray.remote(AppActor)`): `make(host, port)` builds what it serves
    (see the module docstring) on `host`, or on the node's address where `host` is loopback; `what`
    names it in the error raised when it does not start."""

    def __init__(self, make: Callable[[str, int], ActorApp], host: str, what: str) -> None:
        self.host = host if not is_loopback(host) else ray.util.get_node_ip_address()
        self.port = free_port(self.host)
        served = make(self.host, self.port)
        self.close = served.close
        self.thread = ServerThread(served.config, what, START_TIMEOUT_S)

    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def pid(self) -> int:
        return os.getpid()

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def stop(self) -> None:
        """Stop serving, then close what the app held (the actor is killed after)."""
        self.thread.stop()
        if self.close is not None:
            self.close()
