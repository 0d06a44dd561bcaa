"""Lifetimes: TTLs, the warm pool, orphans after a crash, and a clear error without Docker."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from agentrl.sandbox_server.sandboxes.docker_backend import LABEL
from agentrl.sandbox_server.wire.errors import DockerUnavailable, SandboxNotFound
from agentrl.sandbox_server.wire.models import DEFAULT_IMAGE

pytestmark = pytest.mark.docker


def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def containers_of_pid(backend, pid: int) -> list[str]:
    found = backend.docker.api.containers(all=True, filters={"label": f"{LABEL}.pid={pid}"})
    return [c["Id"] for c in found]


def test_idle_ttl_reaps_sandbox_and_container(backend):
    sb = backend.create(idle_ttl_s=0.5)
    container_id = backend._sandboxes[sb.sandbox_id][1]
    sb.exec("echo keep-alive")
    wait_until(lambda: sb.sandbox_id not in {i.sandbox_id for i in backend.list()}, 15, "idle reaping")
    with pytest.raises(SandboxNotFound, match="idle"):
        sb.exec("true")
    wait_until(lambda: container_id not in backend.container_ids(), 15, "the container to be removed")


def test_hard_ttl_reaps_even_a_busy_sandbox(backend):
    sb = backend.create(ttl_s=1.0, idle_ttl_s=600)
    start = time.monotonic()
    with pytest.raises(SandboxNotFound, match="hard TTL"):
        sb.exec("sleep 20", timeout_s=30)  # the sandbox is removed under the running command
    assert time.monotonic() - start < 15
    with pytest.raises(SandboxNotFound, match="hard TTL"):
        sb.exec("true")


def test_warm_pool_hands_over_started_containers(backend):
    wait_until(lambda: len(backend._pool[backend._key(backend.defaults)]) >= 1, 30, "the pool to fill")
    start = time.perf_counter()
    sb = backend.create()
    elapsed = time.perf_counter() - start
    try:
        assert sb.exec("echo warm").stdout == "warm\n"
        assert elapsed < 1.0  # a hand-over, not a container start (speed itself: bench/sandbox.py)
    finally:
        sb.close()


def test_non_default_shape_gets_its_own_container(backend):
    with backend.create(memory_mb=256, pids=64, cpus=0.5) as sb:
        assert sb.exec(
            "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max"
        ).stdout.strip() == str(256 << 20)


def start_orphan(backend) -> str:
    """A running container labelled as a sandbox of a process that has died."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    labels = {
        LABEL: "1",
        f"{LABEL}.owner": "deadbeef",
        f"{LABEL}.host": socket.gethostname(),
        f"{LABEL}.pid": str(dead.pid),
        f"{LABEL}.start": "1",
    }
    api = backend.docker.api
    cid = api.create_container(
        DEFAULT_IMAGE,
        command=["sleep", "600"],
        labels=labels,
        network_disabled=True,
        host_config=api.create_host_config(network_mode="none", read_only=True, cap_drop=["ALL"]),
    )["Id"]
    api.start(cid)
    return cid


def test_startup_reaps_containers_of_dead_owners(backend):
    from agentrl.sandbox_server.sandboxes.docker_backend import DockerBackend

    api = backend.docker.api
    cid = start_orphan(backend)
    other = DockerBackend(pool_size=0)
    try:
        assert not api.containers(all=True, filters={"id": cid})
        # a live owner's containers are left alone
        assert set(backend.container_ids()) <= {c["Id"] for c in api.containers(all=True)}
    finally:
        other.close()


def test_startup_reap_is_over_when_the_backend_is_handed_out(backend):
    """Another sweep (a second server, or this one's periodic reap) has begun removing the orphans
    when a backend starts: the backend is handed out only once they are gone, not while the
    engine still lists them as being removed."""
    from agentrl.sandbox_server.sandboxes.docker_backend import DockerBackend

    api = backend.docker.api
    orphans = [start_orphan(backend) for _ in range(6)]
    sweeps = [threading.Thread(target=remove_quietly, args=(api, cid)) for cid in orphans]
    for sweep in sweeps:
        sweep.start()
    time.sleep(0.05)  # the other sweep's removals are under way
    other = DockerBackend(pool_size=0)
    try:
        assert not [cid for cid in orphans if api.containers(all=True, filters={"id": cid})]
        assert other.orphans_left == 0
    finally:
        other.close()
        for sweep in sweeps:
            sweep.join()


def remove_quietly(api, cid: str) -> None:
    with contextlib.suppress(Exception):
        api.remove_container(cid, force=True)


def running_of_pid(backend, pid: int) -> list[str]:
    found = backend.docker.api.containers(filters={"label": f"{LABEL}.pid={pid}"})  # running ones
    return [c["Id"] for c in found]


def test_containers_die_with_their_server(backend, port):
    """SIGKILL of the server, a command running: within 10 s no container of it runs, with no restart."""
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "agentrl", "sandbox", "serve", "--port", str(port), "--pool-size", "2"]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def up() -> bool:
        assert server.poll() is None, server.stderr.read().decode()
        try:
            return httpx.get(url + "/v1/ping", timeout=1).text == "pong"
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, 60, "the server to start")
        for _ in range(2):
            sid = httpx.post(url + "/v1/sandboxes", json={}, timeout=60).json()["sandbox_id"]
            reply = httpx.post(
                f"{url}/v1/sandboxes/{sid}/exec",
                json={"command": "setsid sleep 3000 & echo hi", "keep_alive": True},
                timeout=60,
            )
            assert reply.json()["stdout"] == "hi\n"
        # a command is running when the server dies
        running = threading.Thread(target=post_quietly, args=(f"{url}/v1/sandboxes/{sid}/exec",), daemon=True)
        running.start()
        time.sleep(0.5)
        assert len(running_of_pid(backend, server.pid)) >= 2
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait()
    killed_at = time.monotonic()
    wait_until(lambda: not running_of_pid(backend, server.pid), 10, "the containers to stop")
    assert time.monotonic() - killed_at < 10
    # they were started with auto-remove: gone altogether soon after
    wait_until(lambda: not containers_of_pid(backend, server.pid), 30, "the containers to be removed")


def post_quietly(url: str) -> None:
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(url, json={"command": "sleep 86400", "timeout_s": 86400}, timeout=30)


def test_missing_docker_is_a_clear_error(monkeypatch):
    from agentrl.sandbox_server.sandboxes.docker_backend import DockerBackend

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(DockerUnavailable) as info:
        DockerBackend(pool_size=0)
    message = str(info.value)
    assert "docker.io" in message and "docker/engine.sh" in message


def test_cli_reports_missing_docker(port):
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    proc = subprocess.run(
        [sys.executable, "-m", "agentrl", "sandbox", "serve", "--port", str(port)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "Docker engine" in proc.stderr and "Traceback" not in proc.stderr


def test_the_agent_ends_when_its_host_falls_silent():
    """The watchdog: heartbeats keep a sandbox alive; without them it ends after `watchdog_s`."""
    from agentrl.sandbox_server.sandboxes.docker_backend import DockerBackend

    with (
        DockerBackend(pool_size=0, watchdog_s=2.0, reap_interval_s=0.5) as beating,
        DockerBackend(pool_size=0, watchdog_s=2.0, reap_interval_s=3600) as silent,
    ):
        alive, orphan = beating.create(), silent.create()
        orphan.exec("sleep 1000 &", keep_alive=True)
        cid = silent._sandboxes[orphan.sandbox_id][1]
        gone = lambda: not silent.docker.api.containers(filters={"id": cid})  # noqa: E731
        wait_until(gone, 20, "the silent host's container to stop")
        assert alive.exec("echo still here").stdout == "still here\n"
