"""No starvation, exact limits, flat memory: floods on one sandbox never stop the server."""

from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from agentrl.sandbox_server.wire.errors import AtCapacity

pytestmark = pytest.mark.docker


def test_a_flood_of_execs_on_one_sandbox_starves_nothing(server):
    headers = {"Authorization": f"Bearer {server.token}"}
    create = lambda: httpx.post(server.url + "/v1/sandboxes", json={}, headers=headers, timeout=60)  # noqa: E731
    offender, other = create().json()["sandbox_id"], create().json()["sandbox_id"]
    url = f"{server.url}/v1/sandboxes/{offender}"
    body = {"command": "sleep 120", "timeout_s": 300}
    limits = httpx.Limits(max_connections=100)
    with httpx.Client(headers=headers, timeout=60, limits=limits) as http:
        pool = concurrent.futures.ThreadPoolExecutor(40)
        floods = [pool.submit(http.post, url + "/exec", json=body) for _ in range(40)]
        deadline = time.monotonic() + 30
        while sum(f.done() for f in floods) < 32 and time.monotonic() < deadline:
            time.sleep(0.05)
        busy = [f for f in floods if f.done()]
        assert len(busy) == 32  # 8 run or wait (one at a time), the 32 others are refused at once
        assert all(f.result().status_code == 429 for f in busy), {f.result().status_code for f in busy}
        assert busy[0].result().json()["kind"] == "too_many_requests"
        # everything else still answers at once
        start = time.monotonic()
        reply = http.post(f"{server.url}/v1/sandboxes/{other}/exec", json={"command": "echo ok"})
        assert reply.json()["stdout"] == "ok\n"
        code = http.post(server.url + "/run_code", json={"code": "print(1)"}, auth=("u", server.token))
        assert code.json()["run_result"]["stdout"] == "1\n"
        assert http.get(url).status_code == 200
        assert time.monotonic() - start < 10
        # DELETE of the offender works, and ends what it runs
        start = time.monotonic()
        assert http.delete(url).status_code == 204
        assert time.monotonic() - start < 10
        rest = [f.result(timeout=30) for f in floods if f not in busy]
        assert len(rest) == 8 and all(r.status_code in (404, 410) for r in rest), [r.text for r in rest]
        http.delete(f"{server.url}/v1/sandboxes/{other}")
        pool.shutdown()


def test_a_caller_that_hangs_up_while_queued_is_counted_not_logged_as_a_crash(server, sandbox_url, caplog):
    """Its call, given its turn, finds no one to read the body from: no "Exception in ASGI
    application" traceback in the server's log, one `client_disconnected` in its metrics."""
    headers = {"Authorization": f"Bearer {server.token}"}
    url, sid = sandbox_url
    uvicorn_log = logging.getLogger("uvicorn.error")  # uvicorn's own: it does not reach the root logger
    uvicorn_log.addHandler(caplog.handler)
    try:
        metric = 'agentrl_errors_total{kind="client_disconnected"}'
        before = metric_value(server.url, headers, metric)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            sleep = {"command": "sleep 2"}
            busy = pool.submit(httpx.post, url + "/exec", json=sleep, headers=headers, timeout=30)
            time.sleep(0.5)  # the sandbox's lane is taken: the next call waits its turn
            body = json.dumps({"command": "echo never"}).encode()
            head = (
                f"POST /v1/sandboxes/{sid}/exec HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {server.token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            with socket.create_connection(("127.0.0.1", server.port)) as caller:
                caller.sendall(head.encode() + body)
                time.sleep(0.3)
            assert busy.result().json()["status"] == "ok"
        deadline = time.monotonic() + 10
        while metric_value(server.url, headers, metric) == before and not caplog.records:
            assert time.monotonic() < deadline, "the queued call never ran"
            time.sleep(0.05)
        time.sleep(0.2)
    finally:
        uvicorn_log.removeHandler(caplog.handler)
    assert [(r.getMessage(), r.exc_info) for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert metric_value(server.url, headers, metric) == before + 1


@pytest.fixture
def sandbox_url(server) -> Iterator[tuple[str, str]]:
    headers = {"Authorization": f"Bearer {server.token}"}
    sid = httpx.post(server.url + "/v1/sandboxes", json={}, headers=headers, timeout=60).json()["sandbox_id"]
    yield f"{server.url}/v1/sandboxes/{sid}", sid
    httpx.delete(f"{server.url}/v1/sandboxes/{sid}", headers=headers, timeout=60)


def metric_value(url: str, headers: dict[str, str], name: str) -> float:
    for line in httpx.get(url + "/metrics", headers=headers).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def test_max_sandboxes_is_exact_under_concurrency():
    from agentrl.sandbox_server.sandboxes.docker_backend import DockerBackend

    with DockerBackend(pool_size=0, max_sandboxes=3, max_concurrent_creates=8) as backend:
        barrier = threading.Barrier(12)

        def create():
            barrier.wait()
            try:
                return backend.create()
            except AtCapacity:
                return None

        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            made = [sb for sb in pool.map(lambda _: create(), range(12)) if sb is not None]
        assert len(made) == 3 and len(backend.list()) == 3
        assert len(backend.container_ids()) == 3


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024


@pytest.fixture(scope="module")
def cli_server():
    from support import free_port

    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "agentrl",
        "sandbox",
        "serve",
        "--port",
        str(port),
        "--max-request-mb",
        "100",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url + "/v1/ping", timeout=1).text == "pong":
                break
        except httpx.HTTPError:
            assert time.monotonic() < deadline and proc.poll() is None, "the server did not start"
            time.sleep(0.2)
    yield proc, url
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_the_served_command_keeps_an_idle_connection_past_a_clients_pool_expiry(cli_server):
    """Else an exec sent as the server closes its connection is lost in flight (`httpx.ReadError`)."""
    from support import answers_after_idling

    assert answers_after_idling(cli_server[1], "/v1/ping")


def test_uploads_and_output_floods_leave_server_memory_flat(cli_server):
    proc, url = cli_server
    sid = httpx.post(url + "/v1/sandboxes", json={}, timeout=60).json()["sandbox_id"]
    files = f"{url}/v1/sandboxes/{sid}/files"
    httpx.put(files, params={"path": "warm"}, content=b"x" * (2 << 20), timeout=60).raise_for_status()
    before = peak_rss_mb(proc.pid)
    data = os.urandom(60 << 20)
    httpx.put(files, params={"path": "big"}, content=data, timeout=120).raise_for_status()
    check = httpx.post(f"{url}/v1/sandboxes/{sid}/exec", json={"command": "stat -c %s big"}, timeout=60)
    assert check.json()["stdout"] == f"{60 << 20}\n"
    flood = {"command": "head -c 50000000 /dev/urandom", "timeout_s": 60, "max_output_bytes": 65536}
    reply = httpx.post(f"{url}/v1/sandboxes/{sid}/exec", json=flood, timeout=120).json()
    assert reply["stdout_bytes"] == 50_000_000 and reply["truncated"]
    growth = peak_rss_mb(proc.pid) - before
    assert growth < 40, f"peak memory grew {growth:.0f} MB for a 60 MB upload and a 50 MB flood"
    httpx.delete(f"{url}/v1/sandboxes/{sid}", timeout=60)
