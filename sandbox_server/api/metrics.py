"""Prometheus metrics of one sandbox server (its own registry, so several apps can live in a process)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

if TYPE_CHECKING:
    from agentrl.sandbox_server.sandboxes.backend import Backend


class Metrics:
    def __init__(self, backend: Backend):
        self.registry = CollectorRegistry()
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

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
