"""What no caller gets past: links out of the workspace, state left for the next /run_code caller,
another tenant's capacity, and request or reply sizes over the operator's limits."""

from __future__ import annotations

import io
import json
import tarfile
import time

import httpx
import pytest
from support import AppServer

from agentrl.sandbox_server.wire.errors import InvalidRequest

pytestmark = pytest.mark.docker

FIXED_TIME_NS = 946684800 * 10**9  # what every wipe puts back on the wiped directories


def as_(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# -- links ------------------------------------------------------------------------------------------
LINKS = (
    "ln -s /etc/hostname host; ln -s /proc/1/cmdline cmd; ln -s /tmp t; ln -s /etc e; mkdir d; ln -s /etc d/e"
)


def test_reads_through_a_link_are_refused(sandbox):
    sandbox.exec(LINKS)
    for path in ("host", "cmd", "e/hostname", "d/e/hostname", "t/anything", "t"):
        with pytest.raises(InvalidRequest, match="symbolic link"):
            sandbox.read_file(path)
    with pytest.raises(InvalidRequest, match="symbolic link"):
        sandbox.get_archive("e/hostname")
    with tarfile.open(fileobj=io.BytesIO(sandbox.get_archive("."))) as tar:  # links stay links
        members = {m.name: m for m in tar.getmembers()}
        assert members["./host"].issym() and members["./host"].linkname == "/etc/hostname"
        assert not any(name.startswith("./e/") or name.startswith("./t/") for name in members)
        assert b"sandbox" not in b"".join(tar.extractfile(m).read() for m in members.values() if m.isfile())


def test_writes_through_a_link_never_land_outside(sandbox):
    sandbox.exec(LINKS + "; ln -s /tmp/victim v")
    for path in ("t/planted", "v", "d/e/planted", "t"):
        with pytest.raises(InvalidRequest, match="symbolic link"):
            sandbox.write_file(path, b"x")
    with pytest.raises(InvalidRequest, match="symbolic link"):
        sandbox.write_file("t/big", b"y" * (3 << 20))  # staged, then put in place
    assert sandbox.exec("ls -A /tmp").stdout == ""
    assert sandbox.exec("readlink v").stdout == "/tmp/victim\n"  # the link itself is untouched


def tar_of(*members: tuple[str, bytes | None]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_archive_members_never_land_outside(sandbox):
    sandbox.exec(LINKS)
    for dest, archive in (
        (".", tar_of(("t/planted", b"x"))),
        ("t", tar_of(("planted", b"x"))),
        ("d", tar_of(("e/planted", b"x"))),
    ):
        with pytest.raises(InvalidRequest, match="symbolic link"):
            sandbox.put_archive(dest, archive)
    assert sandbox.exec("ls -A /tmp").stdout == ""
    sandbox.put_archive("fine", tar_of(("sub", None), ("sub/a.txt", b"ok")))  # plain archives still work
    assert sandbox.read_file("fine/sub/a.txt") == b"ok"


def test_the_http_api_refuses_links_too(client):
    with client.create() as sb:
        sb.exec("ln -s /etc/hostname host; ln -s /tmp t")
        with pytest.raises(InvalidRequest, match="symbolic link"):
            sb.read_file("host")
        with pytest.raises(InvalidRequest, match="symbolic link"):
            sb.write_file("t/planted", b"x")
        assert sb.exec("ls -A /tmp").stdout == ""


@pytest.fixture
def client(server):
    from agentrl.sandbox_server.clients.client import SandboxClient

    with SandboxClient(server.url, token=server.token) as c:
        yield c


# -- the /run_code wipe, across tenants -----------------------------------------------------------------
ATTACK = r"""
import os, struct
os.setxattr("/workspace", "user.leak", b"1")
acl = struct.pack("<I", 2) + b"".join(
    struct.pack("<HHI", tag, perm, uid % 2**32)
    for tag, perm, uid in ((1, 7, -1), (2, 4, 4242), (4, 5, -1), (16, 5, -1), (32, 5, -1))
)
for name in ("system.posix_acl_access", "system.posix_acl_default"):
    try:
        os.setxattr("/workspace", name, acl)
    except OSError as exc:
        print("no ACL:", exc)
os.chmod("/workspace", 0o701)
os.utime("/workspace", (1234567, 1234567))
os.utime("/tmp", None)
print(sorted(os.listxattr("/workspace")))
print(open("/proc/1/stat").read().rsplit(")", 1)[1].split()[19])
"""
PROBE = r"""
import json, os
state = {top: [sorted(os.listxattr(top)), os.stat(top).st_mtime_ns, oct(os.stat(top).st_mode)]
         for top in ("/workspace", "/tmp", "/dev/shm")}
print(json.dumps(state))
print(open("/proc/1/stat").read().rsplit(")", 1)[1].split()[19])
"""


@pytest.fixture(scope="module")
def tenants(backend):
    from agentrl.sandbox_server.api.app import create_app

    app = create_app(backend, tokens={"token-a": "a", "token-b": "b"}, quotas={"a": 2, "b": 2})
    with AppServer(app) as srv:
        yield srv


@pytest.fixture(scope="module")
def two_tenants(backend):
    from agentrl.sandbox_server.api.app import create_app

    with AppServer(create_app(backend, tokens={"token-a": "a", "token-b": "b"})) as srv:
        yield srv


def run_code(srv, token: str, code: str) -> dict:
    body = {"code": code, "language": "python", "run_timeout": 60}
    reply = httpx.post(srv.url + "/run_code", json=body, headers=as_(token), timeout=120)
    assert reply.status_code == 200, reply.text
    return reply.json()


def wait_idle(srv) -> None:
    service = srv.app.state.run_code
    deadline = time.monotonic() + 30
    while not service._idle and time.monotonic() < deadline:
        time.sleep(0.02)


def test_the_wipe_puts_every_wiped_directory_back_in_a_fixed_state(two_tenants):
    """Tenant a sets an xattr, ACLs, the mode and the times of /workspace (and /tmp's mtime); tenant b,
    served by the same runner right after, sees the fixed state, every time."""
    two_tenants.app.state.run_code.close()  # start from no runner: the calls below share one
    fixed = {
        "/workspace": [[], FIXED_TIME_NS, "0o40755"],
        "/tmp": [[], FIXED_TIME_NS, "0o41777"],
        "/dev/shm": [[], FIXED_TIME_NS, "0o41777"],
    }
    reused = 0
    for _ in range(3):
        attack = run_code(two_tenants, "token-a", ATTACK)["run_result"]["stdout"].splitlines()
        assert "user.leak" in attack[-2], attack  # the attack itself worked
        wait_idle(two_tenants)
        probe = run_code(two_tenants, "token-b", PROBE)["run_result"]["stdout"].splitlines()
        assert json.loads(probe[0]) == fixed
        reused += probe[1] == attack[-1]
        wait_idle(two_tenants)
    assert reused >= 2, "the runner was not reused"


# -- tenants' quotas ---------------------------------------------------------------------------------
def test_a_tenant_cannot_take_anothers_capacity(tenants):
    url = tenants.url
    held = []
    try:
        for _ in range(2):
            reply = httpx.post(url + "/v1/sandboxes", json={}, headers=as_("token-a"), timeout=60)
            assert reply.status_code == 200, reply.text
            held.append(reply.json()["sandbox_id"])
        over = httpx.post(url + "/v1/sandboxes", json={}, headers=as_("token-a"), timeout=60)
        assert over.status_code == 429 and over.json()["kind"] == "quota", over.text
        assert "quota of 2" in over.json()["detail"]
        code = {"code": "print(1)", "language": "python"}
        busy = httpx.post(url + "/run_code", json=code, headers=as_("token-a"), timeout=60)
        assert busy.status_code == 429 and busy.json()["kind"] == "quota", busy.text
        # the other tenant still gets its own
        assert run_code(tenants, "token-b", "print(2)")["run_result"]["stdout"] == "2\n"
        mine = httpx.post(url + "/v1/sandboxes", json={}, headers=as_("token-b"), timeout=60)
        assert mine.status_code == 200, mine.text
        httpx.delete(f"{url}/v1/sandboxes/{mine.json()['sandbox_id']}", headers=as_("token-b"))
        # closing one gives the capacity back
        httpx.delete(f"{url}/v1/sandboxes/{held.pop()}", headers=as_("token-a"))
        assert run_code(tenants, "token-a", "print(3)")["run_result"]["stdout"] == "3\n"
    finally:
        for sid in held:
            httpx.delete(f"{url}/v1/sandboxes/{sid}", headers=as_("token-a"))


def test_tenant_flags_parse():
    from agentrl.sandbox_server.cli import parse_tenants

    assert parse_tenants(["a=tok-a:3", "b=to:k", "c=tok-c"]) == (
        {"tok-a": "a", "to:k": "b", "tok-c": "c"},
        {"a": 3},
    )
    for bad in (["a"], ["=tok"], ["a="], ["a=x", "a=y"], ["a=x", "b=x"]):
        with pytest.raises(ValueError, match="--tenant"):
            parse_tenants(bad)


def test_quotas_must_fit_in_the_backend(backend):
    from agentrl.sandbox_server.api.app import create_app

    with pytest.raises(ValueError, match="max_sandboxes"):
        create_app(backend, tokens={"t": "a"}, quotas={"a": backend.max_sandboxes})


# -- sizes -------------------------------------------------------------------------------------------
def test_an_exec_reply_is_bounded_by_the_cap_as_received(sandbox):
    """Output of control bytes (6 bytes each as JSON): the reply as received stays within twice the
    cap plus a few fields, and the kept text within the cap as JSON."""
    cap = 1 << 16
    flood = "head -c 4000000 /dev/zero | tr '\\0' '\\1'; head -c 300000 /dev/zero | tr '\\0' '\\2' >&2"
    reply = sandbox.link.call(
        "exec", wait_s=60, limit=2 * cap + (64 << 10), command=flood, max_output_bytes=cap, mode="oneshot"
    )
    assert reply["stdout_bytes"] == 4000000 and reply["truncated"]
    for stream in ("stdout", "stderr"):
        assert len(json.dumps(reply[stream], ensure_ascii=False)) <= cap + 100
        assert reply[stream].count("\x01" if stream == "stdout" else "\x02") > cap // 8  # not cut to nothing
    plain = sandbox.exec("seq 1 100000", max_output_bytes=cap)
    assert plain.stdout.startswith("1\n2\n") and plain.stdout.endswith("99999\n100000\n")
    assert cap - 100 < len(json.dumps(plain.stdout)) <= cap + 100  # as much as fits, newlines as 2 bytes


@pytest.fixture(scope="module")
def small(backend):
    from agentrl.sandbox_server.api.app import create_app

    app = create_app(backend, token="t", max_json_bytes=1 << 20, max_output_bytes=1 << 20)
    with AppServer(app, token="t") as srv:
        yield srv


def test_stdin_and_output_caps_over_the_operators_limits_are_413(small):
    sid = httpx.post(small.url + "/v1/sandboxes", json={}, headers=as_("t"), timeout=60).json()["sandbox_id"]
    url = f"{small.url}/v1/sandboxes/{sid}/exec"
    try:
        body = json.dumps({"command": "wc -c", "stdin": "x" * (2 << 20)}).encode()
        declared = httpx.post(url, content=body, headers={**as_("t"), "content-type": "application/json"})
        assert declared.status_code == 413 and declared.json()["kind"] == "too_large"
        assert "--max-json-mb" in declared.json()["detail"]

        def chunks():  # no Content-Length: counted as it streams in
            for i in range(0, len(body), 1 << 16):
                yield body[i : i + (1 << 16)]

        streamed = httpx.post(url, content=chunks(), headers={**as_("t"), "content-type": "application/json"})
        assert streamed.status_code == 413 and streamed.json()["kind"] == "too_large"
        wide = httpx.post(url, json={"command": "true", "max_output_bytes": 2 << 20}, headers=as_("t"))
        assert wide.status_code == 413 and "--max-output-mb" in wide.json()["detail"]
        fits = httpx.post(url, json={"command": "wc -c", "stdin": "x" * 900_000}, headers=as_("t"), timeout=9)
        assert fits.status_code == 200 and fits.json()["stdout"] == "900000\n"
    finally:
        httpx.delete(f"{small.url}/v1/sandboxes/{sid}", headers=as_("t"))
