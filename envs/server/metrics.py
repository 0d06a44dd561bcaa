"""Prometheus metrics of one server; a registry per app so that several apps can live in one process."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.live_episodes = Gauge("agentrl_live_episodes", "Episodes currently held", registry=self.registry)
        self.episodes_created = Counter(
            "agentrl_episodes_created", "Episodes created", ["env_id"], registry=self.registry
        )
        self.episodes_closed = Counter(
            "agentrl_episodes_closed", "Episodes closed", ["reason"], registry=self.registry
        )
        self.steps = Counter("agentrl_steps", "Env steps run", ["env_id"], registry=self.registry)
        self.step_seconds = Histogram(
            "agentrl_step_seconds", "Time inside env.step, per step", ["env_id"],
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.errors = Counter("agentrl_errors", "Error responses by code", ["code"], registry=self.registry)
        self.frame_steps = Histogram(
            "agentrl_step_frame_steps", "Steps per frame received on /v1/ws (how well clients coalesce)",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024), registry=self.registry,
        )
        self._per_env: dict[str, tuple[Counter, Histogram]] = {}

    def stepped(self, env_id: str, seconds: float) -> None:
        """Count one step of `env_id` that took `seconds`; the labelled series are looked up once."""
        series = self._per_env.get(env_id)
        if series is None:
            series = self._per_env[env_id] = (self.steps.labels(env_id), self.step_seconds.labels(env_id))
        series[0].inc()
        series[1].observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
