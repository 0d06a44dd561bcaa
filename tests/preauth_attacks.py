"""What a caller without a token can send a server, over raw sockets, and the served commands to
send it to (tests/server/test_server_preauth.py, tests/sandbox/test_sandbox_preauth.py).

The bounds are set small through the `AGENTRL_HTTP_*` environment variables the served commands
read (`agentrl.serving.http_limits`), so that each attack ends in a second or two.
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from support import free_port

PIECE = 64 * 1024
LIMITS = {
    "AGENTRL_HTTP_HEAD_TIMEOUT_S": "3",
    "AGENTRL_HTTP_STALL_TIMEOUT_S": "2",
    "AGENTRL_HTTP_MAX_CONNECTIONS": "24",
}
"""The served commands' bounds: heads keep the default size limit (64 KiB)."""
MAX_CONNECTIONS = int(LIMITS["AGENTRL_HTTP_MAX_CONNECTIONS"])
HEAD_TIMEOUT_S = float(LIMITS["AGENTRL_HTTP_HEAD_TIMEOUT_S"])
STALL_TIMEOUT_S = float(LIMITS["AGENTRL_HTTP_STALL_TIMEOUT_S"])


@dataclass
class Served:
    proc: subprocess.Popen
    url: str
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid


def lower_open_files() -> None:
    """In the child before it runs: a soft open-files limit of a common 1,024, for it to raise."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))


@contextmanager
def served(args: list[str], ready_path: str, log: Path) -> Iterator[Served]:
    """`python -m agentrl *args --port <free>` under `LIMITS`, started with a soft open-files limit of
    1,024, once `ready_path` answers 200; its stderr in `log`."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "agentrl", *args, "--port", str(port)],
                                env={**os.environ, **LIMITS}, stdout=subprocess.DEVNULL, stderr=stderr,
                                preexec_fn=lower_open_files)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + ready_path, timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"`agentrl {' '.join(args)}` did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield Served(proc, url, log)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def open_files(pid: int) -> tuple[int, int]:
    """Process `pid`'s (soft, hard) limit on open files."""
    limits = Path(f"/proc/{pid}/limits").read_text().splitlines()
    line = next(x for x in limits if x.startswith("Max open files"))
    soft, hard = line.split()[3:5]
    return int(soft), int(hard)


def connect(url: str) -> socket.socket:
    address = urlsplit(url)
    return socket.create_connection((address.hostname, address.port), timeout=10)


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reply(sock: socket.socket, wait_s: float = 5.0) -> str:
    """What the server said before closing `sock`: its status code ("408"), "closed" (closed or
    reset without a word), or "open" (still open after `wait_s`: nothing bounded the connection)."""
    sock.settimeout(wait_s)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except TimeoutError:
        return "open"
    except ConnectionError:
        pass
    return received.split(b" ", 2)[1].decode() if received.startswith(b"HTTP/1.1 ") else "closed"


def endless_head(url: str, start: bytes, most: int = 16 << 20) -> tuple[str, int]:
    """Send `start`, then up to `most` bytes of a head that never ends, in 64 KiB pieces; return the
    server's `reply` and how many bytes it took before refusing more."""
    sock = connect(url)
    sent = 0
    try:
        sock.sendall(start)
        while sent < most:
            sock.sendall(b"a" * PIECE)
            sent += PIECE
    except ConnectionError:
        pass
    try:
        return reply(sock), sent
    finally:
        sock.close()


def idle_connections(url: str, count: int) -> list[socket.socket]:
    """`count` connections that send nothing, opened one after another."""
    return [connect(url) for _ in range(count)]
