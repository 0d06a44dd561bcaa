"""A token holder's step latency on `agentrl serve` while one caller without the token attacks it,
beside the same latency with no attacker, in one run (`bench/server.py`'s attack table).

Not a benchmark itself (tests/bench runs every other `bench/*.py` in its quick mode). Each attacker
is a process of its own on the clients' cores:

- a header that never ends: one connection sends `X-Agentrl-Client: aaaa...` in 64 KiB pieces for
  as long as the server takes them, then the next connection does the same;
- an idle flood: `flood` connections that send nothing, each one the server closes opened again.

The server holds a token and at most `flood * 10 // 11` connections (`AGENTRL_HTTP_MAX_CONNECTIONS`):
the flood is the 1,100 idle connections against a 1,024 open-files limit that once refused every
client, scaled. The token holder steps one Echo-v0 episode back to back through `EnvClient` (sync).
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import selectors
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from multiprocessing.synchronize import Event
from pathlib import Path

import numpy as np
from rich.table import Table

from agentrl.client import EnvClient
from agentrl.server.local import free_port

sys.path.insert(0, str(Path(__file__).resolve().parent))
import processes  # bench/processes.py: servers started, awaited and stopped
from measuring import server_cpu_s
from serving import ECHO, call

TOKEN = "bench-token"
PIECE = b"a" * (64 * 1024)
HEAD = b"GET /v1/envs HTTP/1.1\r\nHost: bench\r\nX-Agentrl-Client: "


@dataclass
class AttackRow:
    attacker: str
    latencies_s: np.ndarray
    server_cpu_s: float

    def pct(self, q: float) -> float:
        return float(np.percentile(self.latencies_s, q) * 1000)


def endless_header(address: tuple[str, int], stop: Event) -> None:
    """Headers that never end, one connection after another, until `stop`."""
    while not stop.is_set():
        try:
            with socket.create_connection(address, timeout=5) as sock:
                sock.sendall(HEAD)
                while not stop.is_set():
                    sock.sendall(PIECE)
        except OSError:  # refused: the next connection
            pass


def idle_flood(address: tuple[str, int], flood: int, stop: Event) -> None:
    """`flood` connections that send nothing, each reopened once the server closes it, until `stop`."""
    selector = selectors.DefaultSelector()
    while not stop.is_set():
        while len(selector.get_map()) < flood:
            try:
                selector.register(socket.create_connection(address, timeout=5), selectors.EVENT_READ)
            except OSError:
                break
        time.sleep(0.1)  # topped up ten times a second: a flood, not a storm of connections
        for key, _ in selector.select(timeout=0):  # readable: an answer, then the close
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            selector.unregister(sock)
            sock.close()
    for key in list(selector.get_map().values()):
        key.fileobj.close()  # type: ignore[union-attr]


def _niced(attack: Callable[..., None], *args: object) -> None:
    """Run `attack` at the lowest priority: where it shares a core with the token holder (two cores:
    one for the server, one for every client) it must not slow the holder's client itself; an
    attacker elsewhere on a network would not. Its open-files limit raised, for the flood's sockets."""
    os.nice(19)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    attack(*args)


@contextmanager
def attacking(attack: Callable[..., None], *args: object) -> Iterator[None]:
    stop = multiprocessing.Event()
    attacker = multiprocessing.Process(target=_niced, args=(attack, *args, stop), daemon=True)
    attacker.start()
    try:
        time.sleep(0.5)  # under way before the holder is measured
        yield
    finally:
        stop.set()
        attacker.join(timeout=10)
        if attacker.is_alive():
            attacker.kill()


def holder_steps(client: EnvClient, episode: str, seconds: float) -> np.ndarray:
    action = call("echo", text="hello")
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds
    while (start := time.perf_counter()) < deadline:
        client.step(episode, action)
        latencies.append(time.perf_counter() - start)
    return np.array(latencies)


def under_attack(prefix: list[str], seconds: float, flood: int) -> list[AttackRow]:
    """The holder's steps with no attacker, then under each attacker, on one fresh server."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "AGENTRL_HTTP_MAX_CONNECTIONS": str(flood * 10 // 11)}
    cmd = [*prefix, sys.executable, "-m", "agentrl", "serve", "--port", str(port), "--env", ECHO,
           "--token", TOKEN]
    address = ("127.0.0.1", port)
    attacks: dict[str, tuple[Callable[..., None], tuple[object, ...]] | None] = {
        "none": None,
        "a header that never ends": (endless_header, (address,)),
        f"{flood} idle connections": (idle_flood, (address, flood)),
    }
    rows = []
    with processes.started(cmd, lambda: processes.answers(url), env=env, timeout_s=90,
                           stop_timeout_s=30) as server, EnvClient(url, token=TOKEN) as client:
        episode = client.create_episode(ECHO, seed=0, env_kwargs={"max_turns": 10**9}).episode_id
        holder_steps(client, episode, 0.3)  # warm up
        for name, attack in attacks.items():
            with attacking(attack[0], *attack[1]) if attack else nullcontext():
                cpu = server_cpu_s(server.pid)
                latencies = holder_steps(client, episode, seconds)
                rows.append(AttackRow(name, latencies, server_cpu_s(server.pid) - cpu))
    return rows


def attack_table(rows: list[AttackRow]) -> Table:
    table = Table(title="A token holder's step while one caller without the token attacks "
                        "(Echo-v0, EnvClient.step, one episode back to back; same run, same server)")
    for col in ("attacker", "steps", "p50 ms", "p99 ms", "p99 x no attacker", "server CPU s"):
        table.add_column(col, justify="left" if col == "attacker" else "right")
    calm = rows[0].pct(99)
    for r in rows:
        table.add_row(r.attacker, str(len(r.latencies_s)), f"{r.pct(50):.2f}", f"{r.pct(99):.2f}",
                      f"{r.pct(99) / calm:.2f}x", f"{r.server_cpu_s:.2f}")
    return table
