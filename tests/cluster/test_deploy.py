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
            ("Deployment", "agentrl-cluster"), ("Service", "agentrl-cluster")} <= kinds


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


def test_discovery_lists_every_server_replica():
    docs = {(d["kind"], d["metadata"]["name"]): d for _, d in documents()}
    servers = docs["StatefulSet", "agentrl"]
    (front,) = containers(docs["Deployment", "agentrl-cluster"])
    holders = [a.split("=", 1)[1] for a in front["args"] if a.startswith("--holder=")]
    service = servers["spec"]["serviceName"]
    assert holders == [f"agentrl-{i}=http://agentrl-{i}.{service}:8000"
                       for i in range(servers["spec"]["replicas"])]
