"""Prometheus metrics of one episode server, in the registry of its own every agentrl server keeps
(`agentrl.serving.apps.ServerMetrics`)."""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from agentrl.serving.apps import ServerMetrics

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics(ServerMetrics):
    """Episodes held, made, closed and replayed, steps by env (`StepCounts`), errors by code."""

    def __init__(self) -> None:
        super().__init__()
        self.live_episodes = Gauge("agentrl_live_episodes", "Episodes currently held", registry=self.registry)
        self.episodes_created = Counter(
            "agentrl_episodes_created", "Episodes created", ["env_id"], registry=self.registry
        )
        self.episodes_closed = Counter(
            "agentrl_episodes_closed", "Episodes closed", ["reason"], registry=self.registry
        )
        self.episodes_replayed = Counter(
            "agentrl_episodes_replayed", "Episodes re-created here by a client whose server was lost",
            ["env_id"], registry=self.registry,
        )
        self.step_counts = StepCounts()
        self.registry.register(self.step_counts)
        self.errors = Counter("agentrl_errors", "Error responses by code", ["code"], registry=self.registry)
        self.frame_steps = Histogram(
            "agentrl_step_frame_steps", "Steps per frame received on /v1/ws (how well clients coalesce)",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024), registry=self.registry,
        )

    def watch_holder(self, holder: str, live: Callable[[], int], queued: Callable[[], int]) -> None:
        """Export this server's load under its holder name, read at scrape time (`HolderLoad`)."""
        self.registry.register(HolderLoad(holder, live, queued))

    def stepped(self, env_id: str, seconds: float) -> None:
        """Count one step of `env_id` that took `seconds`."""
        self.step_counts.add(env_id, seconds)


@dataclass
class _EnvSteps:
    count: int = 0
    seconds: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    created: float = field(default_factory=time.time)


class StepCounts:
    """`agentrl_steps` (counter) and `agentrl_step_seconds` (histogram) by env, as prometheus_client's
    own would expose them, counted in plain integers and read at scrape time (a custom collector):
    a step of a light env costs ~20 µs, and the library's counter and histogram took ~2 µs of it
    (a lock per value, a bucket search in Python). Only the event loop counts steps."""

    def __init__(self) -> None:
        self.by_env: dict[str, _EnvSteps] = {}

    def add(self, env_id: str, seconds: float) -> None:
        steps = self.by_env.get(env_id)
        if steps is None:
            steps = self.by_env[env_id] = _EnvSteps()
        steps.count += 1
        steps.seconds += seconds
        steps.buckets[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1

    def collect(self) -> Iterator[Metric]:
        total = CounterMetricFamily("agentrl_steps", "Env steps run", labels=["env_id"])
        timing = HistogramMetricFamily("agentrl_step_seconds", "Time inside env.step, per step",
                                       labels=["env_id"])
        for env_id, steps in list(self.by_env.items()):
            total.add_metric([env_id], steps.count, created=steps.created)
            running, buckets = 0, []
            for bound, count in zip([*LATENCY_BUCKETS, float("inf")], steps.buckets, strict=True):
                running += count
                buckets.append((floatToGoString(bound), running))
            timing.add_metric([env_id], buckets, steps.seconds)
        yield total
        yield timing


class HolderLoad:
    """`agentrl_holder_live_episodes` and `agentrl_holder_queue_depth`, labelled with the holder's
    name: the signals an autoscaler scales holders on (deploy/kubernetes/autoscaler.yaml). The name
    tells apart the holders a scrape finds on one host or one Ray node, and joins each to its entry
    in the cluster's map. Both are read when scraped: the hot path counts nothing for them."""

    def __init__(self, holder: str, live: Callable[[], int], queued: Callable[[], int]) -> None:
        self.holder, self.live, self.queued = holder, live, queued

    def collect(self) -> Iterator[Metric]:
        live = GaugeMetricFamily("agentrl_holder_live_episodes", "Episodes this holder holds now",
                                 labels=["holder"])
        live.add_metric([self.holder], self.live())
        queued = GaugeMetricFamily("agentrl_holder_queue_depth",
                                   "Env calls accepted and waiting for the env's worker threads",
                                   labels=["holder"])
        queued.add_metric([self.holder], self.queued())
        yield live
        yield queued
