"""The step metrics, counted in plain integers, read exactly as prometheus_client's own counter and
histogram would expose the same steps (their `_created` stamps aside)."""

from __future__ import annotations

import random

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from agentrl.server.metrics import LATENCY_BUCKETS, Metrics


def _without_created(text: bytes) -> list[str]:
    return sorted(line for line in text.decode().splitlines()
                  if line.startswith(("agentrl_steps", "agentrl_step_seconds")) and "_created" not in line)


def test_step_metrics_read_as_the_library_would_write_them():
    rng = random.Random(7)
    metrics = Metrics()
    reference = CollectorRegistry()
    steps = Counter("agentrl_steps", "Env steps run", ["env_id"], registry=reference)
    seconds = Histogram("agentrl_step_seconds", "Time inside env.step, per step", ["env_id"],
                        buckets=LATENCY_BUCKETS, registry=reference)
    # every bucket bound itself (le is inclusive), values between them, and past the last one
    values = [*LATENCY_BUCKETS, 0.0, 1e-6, 45.0, *(rng.expovariate(200) for _ in range(500))]
    for value in values:
        env_id = rng.choice(["agentrl/Echo-v0", "agentrl/Flights-v0"])
        metrics.stepped(env_id, value)
        steps.labels(env_id).inc()
        seconds.labels(env_id).observe(value)
    ours, theirs = _without_created(metrics.render()), _without_created(generate_latest(reference))
    assert ours == theirs
    assert any(line.startswith('agentrl_steps_total{env_id="agentrl/Echo-v0"}') for line in ours)
    assert 'agentrl_steps_created{env_id="agentrl/Echo-v0"}' in metrics.render().decode()

