"""Before authentication: what a caller without the token can make `agentrl serve` do is bounded
(the size and time of a head, a stalled body, the connections held), and a token holder is served
throughout. The server is the served command, with small bounds (tests/preauth_attacks.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

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
from server_helpers import ECHO, call
from support import free_port

from agentrl.client import EnvClient, RetryPolicy

TOKEN = "preauth-token"


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Served]:
    args = ["serve", "--env", ECHO, "--token", TOKEN, "--log-level", "info"]
    with served(args, "/health", tmp_path_factory.mktemp("preauth") / "server.log") as server:
        yield server


def steps_an_episode(url: str) -> bool:
    with EnvClient(url, token=TOKEN, retry=RetryPolicy(retries=0)) as client:
        episode = client.create_episode(ECHO, seed=0).episode_id
        return "hi" in client.step(episode, call("echo", text="hi")).observation


def test_the_open_files_limit_is_raised_at_start_and_said_in_the_log(server):
    soft, hard = open_files(server.pid)
    assert soft == hard  # started at 1,024
    assert f"open files: {hard} (" in server.log.read_text()


def test_a_bound_that_is_not_a_number_stops_the_server_at_start():
    command = [sys.executable, "-m", "agentrl", "serve", "--env", ECHO, "--port", str(free_port())]
    done = subprocess.run(command, env={**os.environ, "AGENTRL_HTTP_HEAD_TIMEOUT_S": "soon"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "AGENTRL_HTTP_HEAD_TIMEOUT_S must be a number of seconds above 0, not 'soon'" in done.stderr


def test_a_websocket_outlives_the_head_and_stall_timeouts(server):
    """The bounds end where uvicorn hands a connection to a WebSocket: a step channel may idle."""
    from websockets.sync.client import connect as connect_socket

    url = server.url.replace("http://", "ws://") + "/v1/ws"
    with connect_socket(url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as channel:
        time.sleep(max(HEAD_TIMEOUT_S, STALL_TIMEOUT_S) + 1)
        assert channel.ping().wait(5)  # raises ConnectionClosed where the server closed it


@pytest.mark.parametrize(("start", "status"), [
    (b"GET /", "414"),  # a request line that never ends
    (b"GET /health HTTP/1.1\r\nHost: x\r\nX-Agentrl-Client: ", "431"),  # a header that never ends
])
def test_a_head_that_never_ends_is_refused_early_for_little_cpu(server, start, status):
    pid, url = server.pid, server.url
    before = cpu_s(pid)
    answer, sent = endless_head(url, start)
    # the answer, or a reset that may overtake it while the rest is still in flight
    assert answer in (status, "closed"), answer
    assert sent < 16 << 20  # refused before all of it was taken
    assert cpu_s(pid) - before < 0.25
    assert steps_an_episode(url)


def test_a_complete_request_with_a_1_mb_header_is_refused_431(server):
    url = server.url
    sock = connect(url)
    sock.sendall(b"GET /v1/envs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() +
                 b"\r\nX-Agentrl-Client: " + b"k" * (1 << 20) + b"\r\n\r\n")
    assert reply(sock) in ("431", "closed")
    sock.close()


def test_half_a_head_and_a_silent_connection_are_closed_after_the_head_timeout(server):
    url = server.url
    half, silent = connect(url), connect(url)
    half.sendall(b"POST /v1/episodes HTTP/1.1\r\nHost: x\r\n")
    assert reply(half, wait_s=HEAD_TIMEOUT_S + 3) == "408"
    assert reply(silent, wait_s=1) == "408"
    half.close()
    silent.close()


def test_a_body_that_stalls_after_the_401_is_closed(server):
    url = server.url
    sock = connect(url)
    sock.sendall(b"POST /v1/episodes HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"env\"")
    sock.settimeout(5)
    assert sock.recv(65536).startswith(b"HTTP/1.1 401 ")  # answered at once, the body never read
    assert reply(sock, wait_s=STALL_TIMEOUT_S + 2) == "closed"  # the stall timeout, not the 65 s keep-alive
    sock.close()


def test_a_caller_that_leaves_its_answers_unread_is_cut_off_after_the_stall_timeout(server):
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # full at once
    sock.connect(("127.0.0.1", int(server.url.rsplit(":", 1)[1])))
    request = f"GET /openapi.json HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode()
    sock.sendall(request * 400)  # about 12 MB of answers
    time.sleep(STALL_TIMEOUT_S + 1.5)
    sock.settimeout(3)
    received, ended = 0, False
    try:
        while chunk := sock.recv(1 << 20):
            received += len(chunk)
        ended = True
    except ConnectionError:
        ended = True
    except TimeoutError:
        pass
    sock.close()
    assert ended and received < 400 * 30_000, received  # cut off, not answered in full and kept


def test_idle_connections_past_the_limit_make_room_for_a_token_holder(server):
    url = server.url
    flood = idle_connections(url, MAX_CONNECTIONS + 8)
    try:
        assert steps_an_episode(url)
        # the connections waiting longest were told why they were closed; the newest still wait
        assert [reply(sock, wait_s=1) for sock in flood[:8]] == ["503"] * 8
        flood[-1].sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        flood[-1].settimeout(5)
        assert flood[-1].recv(65536).startswith(b"HTTP/1.1 200 ")
    finally:
        for sock in flood:
            sock.close()


def test_past_the_limit_with_every_connection_owed_a_response_a_newcomer_gets_503(server):
    url = server.url
    # requests the app reads the body of: each connection is owed a response until its body stalls
    busy = idle_connections(url, MAX_CONNECTIONS)
    for sock in busy:
        sock.sendall(b"POST /v1/episodes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() +
                     b"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
    try:
        time.sleep(0.3)  # for the server to read every head
        newcomer = connect(url)
        newcomer.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert reply(newcomer, wait_s=STALL_TIMEOUT_S - 0.5) == "503"
        newcomer.close()
        assert [reply(sock) for sock in busy] == ["408"] * MAX_CONNECTIONS  # the stall timeout
        assert steps_an_episode(url)
    finally:
        for sock in busy:
            sock.close()


def test_the_front_of_processes_bounds_heads_and_silent_connections_too(tmp_path):
    args = ["serve", "--processes", "1", "--env", ECHO, "--token", TOKEN]
    with served(args, "/health", tmp_path / "front.log") as front:
        silent = connect(front.url)
        assert endless_head(front.url, b"GET /")[0] in ("414", "closed")
        assert reply(silent, wait_s=HEAD_TIMEOUT_S + 3) == "408"
        silent.close()
