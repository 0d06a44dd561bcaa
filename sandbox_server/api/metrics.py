"""Prometheus metrics of one sandbox server, in the registry of its own every agentrl server keeps
(`agentrl.serving.apps.ServerMetrics`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import Counter, Gauge, Histogram

from agentrl.serving.apps import ServerMetrics

if TYPE_CHECKING:
    from agentrl.sandbox_server.sandboxes.backend import Backend


class SandboxMetrics(ServerMetrics):
    """The sandboxes open, dead and warm (read when scraped), and the calls served and refused."""

    def __init__(self, backend: Backend):
        super().__init__()
        r = self.registry
        self.open = Gauge("agentrl_sandboxes_open", "sandboxes open now", registry=r)
        self.open.set_function(lambda: len(backend.list()))
        self.dead = Gauge("agentrl_sandboxes_dead", "open sandboxes whose container is dead", registry=r)
        self.dead.set_function(lambda: sum(1 for s in backend.sandboxes() if s.dead))
        self.warm = Gauge("agentrl_warm_containers", "containers started ahead, ready", registry=r)
        self.warm.set_function(backend.warm_count)
        self.created = Counter("agentrl_sandboxes_created", "sandboxes created", registry=r)
        self.execs = Counter("agentrl_execs", "commands run, by status", ["status"], registry=r)
        self.exec_seconds = Histogram(
            "agentrl_exec_seconds",
            "command duration inside the sandbox",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 300),
            registry=r,
        )
        self.run_code = Counter("agentrl_run_code", "/run_code calls, by status", ["status"], registry=r)
        self.errors = Counter("agentrl_errors", "error answers, by kind", ["kind"], registry=r)
        self.rejected = Counter(
            "agentrl_rejected", "calls refused for load, by reason", ["reason"], registry=r
        )
