"""`Sandbox.relay` (POST .../relay): text to a port on the sandbox's own loopback, the answer back, with no
command run; its bounds (bytes kept, time), its refusals (auth, bad bodies: 4xx, never a 500), and a
relay under way ending with its sandbox. Real containers, a real server on loopback."""

from __future__ import annotations

import asyncio
import shlex
import threading
import time

import httpx
import pytest

from agentrl.sandbox_server import AsyncSandboxClient, SandboxClient
from agentrl.sandbox_server.wire.errors import InvalidRequest, SandboxNotFound

pytestmark = pytest.mark.docker

PORT = 5000


def listening(port: int, ready: str) -> str:
    """The start of a server's program: it listens on `port`, then creates the file `ready`."""
    return f"""
import socket, threading, time
server = socket.socket()
server.bind(("127.0.0.1", {port}))
server.listen()
open("{ready}", "w").close()
"""


# a line server: "big" answers 100,000 bytes, "hang" answers a little and never ends, anything else
# comes back in capitals; each answer ends by closing the connection
LINE_SERVER = listening(PORT, "/tmp/up") + """
def serve(conn):
    line = conn.makefile("rb").readline()
    if line == b"big\\n":
        conn.sendall(b"x" * 100000)
    elif line == b"hang\\n":
        conn.sendall(b"partial")
        time.sleep(3600)
    conn.sendall(line.upper())
    conn.close()
while True:
    threading.Thread(target=serve, args=(server.accept()[0],), daemon=True).start()
"""


START = f"python3 -c {shlex.quote(LINE_SERVER)} >/dev/null 2>&1 & until [ -e /tmp/up ]; do sleep 0.01; done"


def start_line_server(sandbox) -> None:
    out = sandbox.exec(START, keep_alive=True, timeout_s=30)
    assert out.status == "ok", out


KEPT_PORT = 5002
# a server answering line after line on one connection, each answer numbered by its connection:
# "bye" is answered and the connection closed, "two" is answered with two lines, "big" with a long line
KEPT_SERVER = listening(KEPT_PORT, "/tmp/kept-up") + """
def serve(conn, number):
    for line in conn.makefile("rb"):
        if line == b"two\\n":
            conn.sendall(b"%d:one\\n%d:two\\n" % (number, number))
            continue
        conn.sendall(b"%d:" % number + (b"x" * 5000 + b"\\n" if line == b"big\\n" else line.upper()))
        if line == b"bye\\n":
            conn.close()
            open("/tmp/closed", "w").close()
            return
    conn.close()
number = 0
while True:
    conn = server.accept()[0]
    number += 1
    threading.Thread(target=serve, args=(conn, number), daemon=True).start()
"""


def test_a_relay_answers_what_a_kept_server_says_within_its_bounds(sandbox):
    assert sandbox.relay(PORT, "hello\n").status == "refused"  # nothing listens yet
    start_line_server(sandbox)
    answer = sandbox.relay(PORT, "hello, wörld\n")
    assert (answer.status, answer.data, answer.truncated) == ("ok", "HELLO, WöRLD\n", False)  # bytes: ASCII
    big = sandbox.relay(PORT, "big\n", max_output_bytes=1000)
    assert (big.status, big.data, big.truncated) == ("ok", "x" * 1000, True)
    assert sandbox.relay(PORT, "big\n").data == "x" * 65536  # the default cap
    began = time.monotonic()
    hung = sandbox.relay(PORT, "hang\n", timeout_s=0.5)
    assert (hung.status, hung.data, hung.truncated) == ("timeout", "partial", False)
    assert 0.4 < time.monotonic() - began < 5
    assert sandbox.relay(PORT + 1, "x\n").status == "refused"
    assert sandbox.exec("echo still here").stdout == "still here\n"  # the agent serves on
    for port in (0, 65536, "5000", True):
        with pytest.raises(InvalidRequest, match="port"):
            sandbox.relay(port, "x\n")
    with pytest.raises(InvalidRequest):
        sandbox.relay(PORT, "x\n", max_output_bytes=0)


def test_a_relay_that_asks_for_lines_keeps_its_connection_for_the_next(sandbox):
    up = "until [ -e /tmp/kept-up ]; do sleep 0.01; done"
    start = f"python3 -c {shlex.quote(KEPT_SERVER)} >/dev/null 2>&1 & {up}"
    assert sandbox.exec(start, keep_alive=True, timeout_s=30).status == "ok"
    until_closed = "until [ -e /tmp/closed ]; do sleep 0.01; done"

    def line(text: str, **changes) -> tuple[str, str, bool]:
        out = sandbox.relay(KEPT_PORT, text, reply_ends="line", **changes)
        return out.status, out.data, out.truncated

    assert [line("a\n"), line("b\n")] == [("ok", "1:A\n", False), ("ok", "1:B\n", False)]  # one connection
    assert line("bye\n") == ("ok", "1:BYE\n", False)  # answered, then the server closed it
    assert sandbox.exec(until_closed, timeout_s=30).status == "ok"
    assert line("c\n") == ("ok", "2:C\n", False)  # the closed connection was replaced
    assert line("two\n") == ("ok", "2:one\n", False)  # through the first newline; the rest is dropped
    assert line("d\n") == ("ok", "3:D\n", False)  # ... with its connection: no stale line comes back
    assert line("big\n", max_output_bytes=100) == ("ok", "3:" + "x" * 98, True)
    assert line("e\n") == ("ok", "4:E\n", False)
    sandbox.reset_processes()  # the server goes, and the kept connection with it
    assert line("f\n")[0] == "refused"
    assert sandbox.relay(KEPT_PORT, "x\n", reply_ends="close").status == "refused"
    with pytest.raises(InvalidRequest):
        sandbox.relay(KEPT_PORT, "x\n", reply_ends="lines")


def test_a_relay_under_way_ends_with_its_sandbox(backend):
    sandbox = backend.create()
    start_line_server(sandbox)
    failures: list[BaseException] = []

    def waiting() -> None:
        try:
            sandbox.relay(PORT, "hang\n", timeout_s=60)
        except BaseException as exc:  # what the relay raised is the test's subject
            failures.append(exc)

    thread = threading.Thread(target=waiting)
    thread.start()
    time.sleep(0.5)
    began = time.monotonic()
    sandbox.close()
    thread.join(timeout=20)
    assert not thread.is_alive() and time.monotonic() - began < 20
    assert len(failures) == 1 and isinstance(failures[0], SandboxNotFound), failures


def test_the_relay_route_asks_the_token_and_answers_a_bad_body_with_a_clear_4xx(server):
    headers = {"Authorization": f"Bearer {server.token}"}
    with SandboxClient(server.url, token=server.token) as client, client.create() as sb:
        start_line_server(sb)
        answer = sb.relay(PORT, "over http\n")
        assert (answer.status, answer.data) == ("ok", "OVER HTTP\n")
        url = f"{server.url}/v1/sandboxes/{sb.sandbox_id}/relay"
        assert httpx.post(url, json={"port": PORT, "data": "x\n"}).status_code == 401
        wrong = httpx.post(url, json={"port": PORT, "data": "x\n"}, headers={"Authorization": "Bearer no"})
        assert wrong.status_code == 401
        for body in (
            {},
            {"data": "x"},
            {"port": PORT},
            {"port": 0, "data": "x"},
            {"port": 65536, "data": "x"},
            {"port": "5000", "data": "x"},
            {"port": 5000.5, "data": "x"},
            {"port": PORT, "data": 3},
            {"port": PORT, "data": "x", "timeout_s": 0},
            {"port": PORT, "data": "x", "max_output_bytes": 0},
            {"port": PORT, "data": "x", "host": "10.0.0.1"},  # only the sandbox's loopback
        ):
            reply = httpx.post(url, json=body, headers=headers)
            assert reply.status_code == 422, (body, reply.text)
        assert httpx.post(url, content=b"{not json", headers=headers).status_code == 422
        too_much = {"port": PORT, "data": "x", "max_output_bytes": 64 << 20}
        over = httpx.post(url, json=too_much, headers=headers)
        assert over.status_code == 413 and over.json()["kind"] == "too_large"  # the server's --max-output-mb
        missing = httpx.post(f"{server.url}/v1/sandboxes/nope/relay", json={"port": 1, "data": ""},
                             headers=headers)
        assert missing.status_code == 404 and missing.json()["kind"] == "sandbox_not_found"

    async def through_the_async_client() -> str:
        async with AsyncSandboxClient(server.url, token=server.token) as other, await other.create() as asb:
            start = await asb.exec(START, keep_alive=True, timeout_s=30)
            assert start.status == "ok", start
            return (await asb.relay(PORT, "async\n")).data

    assert asyncio.run(through_the_async_client()) == "ASYNC\n"
    gone = httpx.post(url, json={"port": PORT, "data": "x\n"}, headers=headers)
    assert gone.status_code == 404  # closed with its sandbox
