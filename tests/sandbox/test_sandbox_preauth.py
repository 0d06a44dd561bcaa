"""Before authentication: what a caller without the token can make `agentrl sandbox serve` do is
bounded (the size and time of a head, a stalled body, the connections held), and a token holder is
served throughout. The server is the served command on the local backend (the bounds are the HTTP
server's, not Docker's), with small bounds (tests/preauth_attacks.py)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from preauth_attacks import (
    HEAD_TIMEOUT_S,
    MAX_CONNECTIONS,
    STALL_TIMEOUT_S,
    Served,
    connect,
    cpu_s,
    endless_head,
    idle_connections,
    open_files,
    reply,
    served,
)

TOKEN = "preauth-token"
LOCAL = ["--backend", "local", "--token", TOKEN, "--pool-size", "0"]


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Served]:
    log = tmp_path_factory.mktemp("preauth") / "server.log"
    with served(["sandbox", "serve", *LOCAL], "/v1/ping", log) as server:
        yield server


def runs_a_command(url: str) -> bool:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
        sandbox = http.post("/v1/sandboxes", json={}).raise_for_status().json()["sandbox_id"]
        try:
            done = http.post(f"/v1/sandboxes/{sandbox}/exec", json={"command": "echo ok"}).raise_for_status()
            return done.json()["stdout"] == "ok\n"
        finally:
            http.delete(f"/v1/sandboxes/{sandbox}")


def test_the_open_files_limit_is_raised_at_start(server):
    soft, hard = open_files(server.pid)
    assert soft == hard  # started at 1,024


@pytest.mark.parametrize(("start", "status"), [
    (b"GET /", "414"),  # a request line that never ends
    (b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ", "431"),  # a header that never ends
])
def test_a_head_that_never_ends_is_refused_early_for_little_cpu(server, start, status):
    pid, url = server.pid, server.url
    before = cpu_s(pid)
    answer, sent = endless_head(url, start)
    assert answer in (status, "closed"), answer  # a reset may overtake the answer
    assert sent < 16 << 20
    assert cpu_s(pid) - before < 0.25
    assert runs_a_command(url)


def test_half_a_head_is_closed_after_the_head_timeout(server):
    url = server.url
    half = connect(url)
    half.sendall(b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Type: app")
    assert reply(half, wait_s=HEAD_TIMEOUT_S + 3) == "408"
    half.close()


def test_a_body_that_stalls_is_closed_after_the_stall_timeout(server):
    url = server.url
    sock = connect(url)
    sock.sendall(b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 1000\r\n\r\n{")
    assert reply(sock, wait_s=STALL_TIMEOUT_S + 3) in ("401", "408", "closed")
    sock.close()


def test_idle_connections_past_the_limit_make_room_for_a_token_holder(server):
    url = server.url
    flood = idle_connections(url, MAX_CONNECTIONS + 8)
    try:
        assert runs_a_command(url)
        assert [reply(sock, wait_s=1) for sock in flood[:8]] == ["503"] * 8
    finally:
        for sock in flood:
            sock.close()


def test_the_front_of_processes_bounds_heads_and_silent_connections_too(tmp_path):
    with served(["sandbox", "serve", "--processes", "1", *LOCAL], "/health", tmp_path / "front.log") as front:
        silent = connect(front.url)
        assert endless_head(front.url, b"GET /")[0] in ("414", "closed")
        assert reply(silent, wait_s=HEAD_TIMEOUT_S + 3) == "408"
        silent.close()
