"""deploy/kubernetes: every manifest is valid against the Kubernetes schemas (offline, strict), and
the commands its containers run are ones agentrl's own parser accepts."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml
from support import unavailable

from agentrl.cli import build_parser

try:
    import kubernetes_validate  # a [dev] dependency: the schemas, offline
except ImportError:
    kubernetes_validate = None

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
KUBERNETES_VERSION = "1.30"


@pytest.fixture(autouse=True)
def _schemas():
    if kubernetes_validate is None:
        unavailable("kubernetes-validate is not installed")


def documents():
    for path in MANIFESTS:
        for doc in yaml.safe_load_all(path.read_text()):
            yield path.name, doc


def containers(doc):
    return doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])


def test_the_manifests_hold_servers_discovery_and_sandbox_servers():
    kinds = {(doc["kind"], doc["metadata"]["name"]) for _, doc in documents()}
    assert {("StatefulSet", "agentrl"), ("Service", "agentrl"), ("DaemonSet", "agentrl-sandbox"),
            ("Deployment", "agentrl-cluster"), ("Service", "agentrl-cluster"),
            ("HorizontalPodAutoscaler", "agentrl")} <= kinds


@pytest.mark.parametrize(("name", "doc"), list(documents()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_manifest_is_valid(name, doc):
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_validation_can_fail():
    _, doc = next((n, d) for n, d in documents() if d["kind"] == "StatefulSet")
    broken = copy.deepcopy(doc)
    broken["spec"]["replica"] = 2  # a misspelled field
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_containers_run_commands_agentrl_accepts():
    parser = build_parser()
    for _, doc in documents():
        for container in containers(doc):
            args = [re.sub(r"\$\((\w+)\)", "x", a) for a in container["args"]]
            assert args[0] == "agentrl"
            parsed = parser.parse_args(args[1:])
            assert parsed.handler is not None


def test_discovery_lists_every_server_replica_the_autoscaler_may_run():
    docs = {(d["kind"], d["metadata"]["name"]): d for _, d in documents()}
    servers = docs["StatefulSet", "agentrl"]
    scaler = docs["HorizontalPodAutoscaler", "agentrl"]["spec"]
    assert scaler["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "agentrl"}
    assert scaler["minReplicas"] <= servers["spec"]["replicas"] <= scaler["maxReplicas"]
    (front,) = containers(docs["Deployment", "agentrl-cluster"])
    holders = [a.split("=", 1)[1] for a in front["args"] if a.startswith("--holder=")]
    service = servers["spec"]["serviceName"]
    assert holders == [f"agentrl-{i}=http://agentrl-{i}.{service}:8000" for i in range(scaler["maxReplicas"])]


def test_the_autoscaler_reads_metrics_every_server_exports():
    """Each Pods metric the autoscaler scales on is a series of a real server's /metrics, labelled
    with its holder, and moves with its load."""
    from fastapi.testclient import TestClient

    from agentrl.server.app import create_app
    from agentrl.server.config import ServerConfig

    docs = {(d["kind"], d["metadata"]["name"]): d for _, d in documents()}
    scaler = docs["HorizontalPodAutoscaler", "agentrl"]["spec"]
    wanted = {m["pods"]["metric"]["name"] for m in scaler["metrics"]}
    assert wanted == {"agentrl_holder_live_episodes", "agentrl_holder_queue_depth"}
    with TestClient(create_app(ServerConfig(holder="agentrl-3", env_ids=("agentrl/Echo-v0",)))) as http:
        for _ in range(2):
            assert http.post("/v1/episodes", json={"env_id": "agentrl/Echo-v0", "seed": 1}).status_code == 201
        text = http.get("/metrics").text
    for name in wanted:
        assert f"# TYPE {name} gauge" in text
    assert 'agentrl_holder_live_episodes{holder="agentrl-3"} 2.0' in text
    assert 'agentrl_holder_queue_depth{holder="agentrl-3"} 0.0' in text


def test_queue_depth_counts_the_calls_waiting_for_a_worker():
    import asyncio
    import threading

    from agentrl.server.dispatch import PackedExecutor

    async def run() -> tuple[int, int]:
        executor = PackedExecutor(workers=1)
        release = threading.Event()
        calls = [executor.run("slow", release.wait, 30) for _ in range(3)]
        await asyncio.sleep(0.05)  # flushed: one call runs (an unmeasured kind goes alone), two wait
        waiting = executor.queued()
        release.set()
        await asyncio.gather(*calls)
        executor.pool.shutdown()
        return waiting, executor.queued()

    assert asyncio.run(run()) == (2, 0)
