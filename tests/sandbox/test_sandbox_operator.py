"""What the operator controls and what bad requests get: tenants, images, metrics, paths, dead sandboxes."""

from __future__ import annotations

import io
import tarfile

import httpx
import pytest
from support import AppServer

from agentrl.sandbox_server.wire.errors import InvalidRequest

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def tenants(backend):
    from agentrl.sandbox_server.api.app import create_app

    app = create_app(backend, tokens={"token-a": "a", "token-b": "b"}, allowed_images=["agentrl-extra:x"])
    with AppServer(app) as srv:
        yield srv


def as_(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_tenant_sees_and_touches_only_its_own_sandboxes(tenants):
    url = tenants.url
    sid = httpx.post(url + "/v1/sandboxes", json={}, headers=as_("token-a"), timeout=60).json()["sandbox_id"]
    try:
        assert [s["sandbox_id"] for s in httpx.get(url + "/v1/sandboxes", headers=as_("token-a")).json()] == [
            sid
        ]
        assert httpx.get(url + "/v1/sandboxes", headers=as_("token-b")).json() == []
        for method, path, body in (
            ("GET", "", None),
            ("POST", "/exec", {"command": "true"}),
            ("POST", "/reset_processes", None),
            ("GET", "/files?path=x", None),
            ("DELETE", "", None),
        ):
            reply = httpx.request(
                method, f"{url}/v1/sandboxes/{sid}{path}", json=body, headers=as_("token-b")
            )
            assert reply.status_code == 404 and reply.json()["kind"] == "sandbox_not_found", (method, path)
        assert httpx.get(f"{url}/v1/sandboxes/{sid}", headers=as_("token-a")).status_code == 200
        assert httpx.get(f"{url}/v1/sandboxes/{sid}", headers=as_("nope")).status_code == 401
    finally:
        assert httpx.delete(f"{url}/v1/sandboxes/{sid}", headers=as_("token-a")).status_code == 204


def test_only_allowed_images(tenants):
    for image in ("agentrl-sandbox-base:bookworm", "alpine:latest", "agentrl-extra:y"):
        reply = httpx.post(tenants.url + "/v1/sandboxes", json={"image": image}, headers=as_("token-a"))
        assert reply.status_code == 403 and reply.json()["kind"] == "forbidden", image
        assert "allow-list" in reply.json()["detail"]


def test_prometheus_metrics(tenants):
    headers = as_("token-a")
    sid = httpx.post(tenants.url + "/v1/sandboxes", json={}, headers=headers, timeout=60).json()["sandbox_id"]
    httpx.post(f"{tenants.url}/v1/sandboxes/{sid}/exec", json={"command": "true"}, headers=headers)
    text = httpx.get(tenants.url + "/metrics", headers=headers).text
    httpx.delete(f"{tenants.url}/v1/sandboxes/{sid}", headers=headers)
    from prometheus_client.parser import text_string_to_metric_families

    samples = {
        s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels
    }
    assert samples["agentrl_sandboxes_open"] >= 1
    assert samples["agentrl_sandboxes_created_total"] >= 1
    assert 0 <= samples["agentrl_warm_containers"] <= 2  # the backend's pool_size
    assert 'agentrl_execs_total{status="ok"}' in text
    assert httpx.get(tenants.url + "/metrics").status_code == 401


@pytest.mark.parametrize(
    "env", [{"A\0B": "1"}, {"A=B": "1"}, {"": "1"}, {"OK": "a\0b"}, {"BASH_FUNC_cat%%": "x"}]
)
def test_bad_env_is_refused_at_create(server, backend, env):
    headers = as_(server.token)
    before = len(backend.list())
    reply = httpx.post(server.url + "/v1/sandboxes", json={"env": env}, headers=headers)
    assert reply.status_code == 422, reply.text
    assert len(backend.list()) == before
    with pytest.raises(InvalidRequest):
        backend.create(env=env)


def tar_of(*members: tarfile.TarInfo) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for member in members:
            tar.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
    return buf.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    info.size = 1 if kind == tarfile.REGTYPE else 0
    return info


def test_paths_are_confined_to_the_workspace(server):
    headers = as_(server.token)
    sid = httpx.post(server.url + "/v1/sandboxes", json={}, headers=headers, timeout=60).json()["sandbox_id"]
    url = f"{server.url}/v1/sandboxes/{sid}/files"
    try:
        for path in ("/etc/passwd", "/tmp/x", "../x", "a/../../x", "a/..", "x/" * 2000, "a" * 300, "a\0b"):
            for method in ("PUT", "GET"):
                reply = httpx.request(method, url, params={"path": path}, content=b"x", headers=headers)
                assert 400 <= reply.status_code < 500 and reply.json()["detail"], (
                    method,
                    path[:20],
                    reply.text,
                )
        evil = {
            "dot-dot": tar_of(member("../evil")),
            "absolute": tar_of(member("/etc/evil")),
            "symlink out": tar_of(member("l", tarfile.SYMTYPE, "/etc")),
            "relative symlink out": tar_of(member("l", tarfile.SYMTYPE, "../../etc")),
            "hard link out": tar_of(member("h", tarfile.LNKTYPE, "../../etc/passwd")),
            "device": tar_of(member("dev", tarfile.CHRTYPE)),
            "fifo": tar_of(member("fifo", tarfile.FIFOTYPE)),
            "not a tar": b"\x00garbage" * 100,
        }
        for what, data in evil.items():
            reply = httpx.put(url, params={"path": "dest", "archive": True}, content=data, headers=headers)
            assert reply.status_code == 400, (what, reply.text)
        listing = httpx.post(
            f"{server.url}/v1/sandboxes/{sid}/exec",
            json={"command": "ls -A; ls -A dest 2>&1"},
            headers=headers,
        )
        assert "evil" not in listing.text and listing.json()["stdout"] in (
            "",
            "ls: cannot access 'dest': No such file or directory\n",
        )
    finally:
        httpx.delete(f"{server.url}/v1/sandboxes/{sid}", headers=headers)


@pytest.mark.parametrize("how", ["kill", "pause"])
def test_a_dead_container_is_reported_dead_on_every_route(server, backend, how):
    headers = as_(server.token)
    sid = httpx.post(server.url + "/v1/sandboxes", json={}, headers=headers, timeout=60).json()["sandbox_id"]
    cid = backend._sandboxes[sid][1]
    getattr(backend.docker.api, how)(cid)
    url = f"{server.url}/v1/sandboxes/{sid}"
    try:
        import time

        deadline = time.monotonic() + 10
        while httpx.get(url, headers=headers).status_code != 410 and time.monotonic() < deadline:
            time.sleep(0.05)
        for method, path, body in (
            ("GET", "", None),
            ("POST", "/exec", {"command": "true"}),
            ("POST", "/exec", {"code": "print(1)"}),
            ("POST", "/reset_processes", None),
            ("GET", "/files?path=x", None),
            ("PUT", "/files?path=x", None),
        ):
            reply = httpx.request(method, url + path, json=body, headers=headers, timeout=30)
            assert reply.status_code == 410, (how, method, path, reply.text)
            assert reply.json()["kind"] == "sandbox_dead" and "DELETE" in reply.json()["detail"]
    finally:
        assert httpx.delete(url, headers=headers, timeout=30).status_code == 204
    assert httpx.get(url, headers=headers).status_code == 404
