"""Benchmark of the sandbox server on more than one core: one process against two, in one run.

    .venv/bin/python bench/sandbox_processes.py            # full run (~3 minutes on a quiet two-core machine)
    .venv/bin/python bench/sandbox_processes.py --quick    # short run (~1 minute), 1 and 8 sandboxes

Measures execs/s (`echo` in each sandbox's persistent shell, back to back) at 1, 8 and 32 live
sandboxes on one `agentrl sandbox serve` process (the baseline) and on `agentrl sandbox serve
--processes 2`, with the ratio; and the exec latency (median, p99) at 1 sandbox on each, then
what one exec at 1 sandbox is made of: the agent's own time, the host's round trip to the agent
(through the container's attach stream), an HTTP round trip to the server alone, and the whole exec. The load
comes from `--client-processes K` client processes on the same cores, as rollout workers on the
machine would run them (`bench/client_processes.py`: each an asyncio loop over its share of the
sandboxes, through `AsyncSandboxClient` for the one server and `AsyncSandboxCluster` for the two,
which sends each call straight to its sandbox's server; their windows open and close together).
K is 4 by default, two for each server process of the cluster and the same for both columns: an
exec costs its client more CPU than its server, so fewer would make the clients the bound. Each
row records the load average. Loopback only; needs a Docker engine and the sandbox image
(`bash docker/engine.sh`).

Which side was busy: over each window, each server process's share of a core and the client
processes' summed (from /proc), and the servers' execs per second of their own CPU, times the
server processes: what they would serve each on a core of its own, the figure that scales where
clients and servers share the cores. Where the CPU went: every row's window is also accounted by
who used the machine's cores (the client processes, the sandbox server's processes, the agents in
the containers, Docker's engine, anything else), in CPU milliseconds per exec, with how busy the
cores were. When the cores are saturated at one process, a second process has no core to run on,
and the table's bound says what the same execs would reach with the clients on another machine
(the rollout workers' usual place).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import statistics
import sys
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console
from rich.table import Table

from agentrl.sandbox_server.cluster.processes import free_port

sys.path.insert(0, str(Path(__file__).resolve().parent))
import client_processes  # bench/client_processes.py: clients in processes of their own, both sides' CPU
import processes as bench_processes  # bench/processes.py: servers started, awaited and stopped
from measuring import p99, server_cpu_s  # bench/measuring.py: a p99 as the benches take it, a process's CPU

START_TIMEOUT_S = bench_processes.START_TIMEOUT_S


@contextmanager
def served(processes: int, max_sandboxes: int):
    """`agentrl sandbox serve` (one process) or `--processes N` on a free loopback port; yields its URL
    and the pid of the process started (its holders are that process's children)."""
    port = free_port("127.0.0.1")
    args = [sys.executable, "-m", "agentrl", "sandbox", "serve", "--port", str(port), "--pool-size", "2",
            "--max-sandboxes", str(max_sandboxes)]
    if processes > 1:
        args += ["--processes", str(processes)]
    url = f"http://127.0.0.1:{port}"
    ready_url = url if processes == 1 else f"{url}/v1/cluster"
    ready = lambda: bench_processes.answers(ready_url)  # noqa: E731
    with bench_processes.started(args, ready, stop_timeout_s=120) as proc:
        yield url, proc.pid


async def _drive(url: str, cluster: bool, sandboxes: int, seconds: float,
                 gate: client_processes.Gate) -> dict[str, Any]:
    """One client process: `sandboxes` sandboxes, each execing back to back for `seconds`."""
    from agentrl.sandbox_server import AsyncSandboxClient, AsyncSandboxCluster

    client: Any = AsyncSandboxCluster(url) if cluster else AsyncSandboxClient(url)
    made = await asyncio.gather(*(client.create() for _ in range(sandboxes)))
    await asyncio.gather(*(s.exec("true") for s in made))  # each shell started before the window
    gate.opened()
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def loop(sandbox: Any) -> None:
        while time.perf_counter() < stop_at:
            began = time.perf_counter()
            result = await sandbox.exec("echo hi")
            latencies.append(time.perf_counter() - began)
            assert result.stdout == "hi\n", result

    began = time.perf_counter()
    await asyncio.gather(*(loop(s) for s in made))
    elapsed = time.perf_counter() - began
    gate.closed()
    await asyncio.gather(*(s.aclose() for s in made))
    await client.aclose()
    return {"execs": len(latencies), "elapsed": elapsed, "latencies": latencies}


ENGINE = ("dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2", "runc", "docker-init")


def _cpu_by_part(server_pid: int) -> dict[str, float]:
    """CPU seconds (user + system) used so far by the sandbox server's processes, the processes in
    the containers (the agents and what they run), Docker's engine, and the whole machine (busy
    time of all cores)."""
    def times(proc: psutil.Process) -> tuple[float, float]:
        """Its own CPU time, and that of its children that exited and were waited for (an exec's
        short-lived processes), so that a process gone within the window still counts."""
        try:
            t = proc.cpu_times()
        except psutil.Error:  # gone between the listing and the read: its parent's reaped time has it
            return 0.0, 0.0
        return t.user + t.system, t.children_user + t.children_system

    def tree(proc: psutil.Process) -> float:
        """A process and all its descendants, the exited ones included."""
        return sum(sum(times(p)) for p in (proc, *proc.children(recursive=True)))

    parts = {"servers": tree(psutil.Process(server_pid)), "agents": 0.0, "engine": 0.0}
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] in ENGINE:
            own, reaped = times(proc)
            if proc.info["name"].startswith("containerd-shim"):  # what runs in its container is the agents'
                parts["engine"] += own
                with contextlib.suppress(psutil.Error):  # a shim gone with its container: nothing to count
                    parts["agents"] += tree(proc) - own
            else:
                parts["engine"] += own + reaped
    t = psutil.cpu_times()  # busy: what /proc/stat counts as neither idle nor waiting (guest is in user)
    busy = ("user", "nice", "system", "irq", "softirq", "steal")
    parts["machine"] = sum(getattr(t, k, 0.0) for k in busy)
    return parts


@dataclass(frozen=True)
class Execs:
    """Execs/s of a window driven from client processes, every exec's latency (s), the window's CPU
    per exec (ms) by part with the cores' busy share, and the window itself (each server and client
    process's CPU)."""

    execs_s: float
    latencies: list[float]
    cpu: dict[str, float]
    window: client_processes.Window

    @property
    def per_server_cpu_s(self) -> float:
        """Execs per second of the servers' own CPU (their processes and children): what scales with
        server processes on cores of their own."""
        return 1e3 / max(self.cpu["servers"], 1e-9)


def execs_per_s(url: str, cluster: bool, sandboxes: int, seconds: float, server_pid: int,
                clients: int) -> Execs:
    """Execs/s of `sandboxes` sandboxes split over `clients` client processes (none without a sandbox)."""
    holders = psutil.Process(server_pid).children() if cluster else ()
    server_pids = [p.pid for p in holders] or [server_pid]
    shares = [(url, cluster, n, seconds) for _first, n in client_processes.split(sandboxes, clients)]
    window = client_processes.run(_drive, shares, server_pids, lambda: _cpu_by_part(server_pid))
    execs = sum(r["execs"] for r in window.results)
    cpu = {part: spent * 1e3 / execs for part, spent in window.read.items()}
    cpu["clients"] = sum(window.client_cpu_s) * 1e3 / execs
    cpu["other"] = cpu.pop("machine") - sum(cpu.values())
    cpu["busy"] = window.read["machine"] / (window.wall_s * psutil.cpu_count())
    return Execs(sum(r["execs"] / r["elapsed"] for r in window.results),
                 [x for r in window.results for x in r["latencies"]], cpu, window)


AGENT, DIRECT, HTTP, SERVED = ("the agent's own time (its duration_ms)",
                               "host -> agent -> host (AgentSandbox.exec in this process)",
                               "an HTTP round trip alone (GET /health)", "exec through the server")


async def _exec_parts(url: str, server_pid: int, blocks: int,
                      per_block: int) -> tuple[dict[str, list[float]], dict[str, float]]:
    """What one exec at 1 sandbox is made of: `echo hi` straight through a sandbox's agent link (a
    DockerBackend in this process), an HTTP round trip to the server that does nothing, and `echo hi`
    through the server; in blocks of `per_block`, alternated, so that the machine's swings fall on
    each alike. The latencies (s) of each, and the server process's CPU seconds per call in the
    blocks of the two that go through it (what an exec's route costs beyond the HTTP server's own
    work is the difference)."""
    from agentrl.sandbox_server import AsyncSandboxClient, DockerBackend

    parts: dict[str, list[float]] = {AGENT: [], DIRECT: [], HTTP: [], SERVED: []}
    server_s: dict[str, float] = {HTTP: 0.0, SERVED: 0.0}
    backend = DockerBackend(pool_size=0)
    client = AsyncSandboxClient(url)
    try:
        local, remote = backend.create(), await client.create()
        for _ in range(20):  # each shell started, each connection open
            local.exec("true")
            await remote.exec("true")
        for block in range(blocks):
            for part in (DIRECT, HTTP, SERVED)[::1 if block % 2 else -1]:
                began_cpu = server_cpu_s(server_pid)
                for _ in range(per_block):
                    began = time.perf_counter()
                    if part == DIRECT:
                        parts[AGENT].append(local.exec("echo hi").duration_ms / 1e3)
                    elif part == HTTP:
                        (await client.http.get("/health")).raise_for_status()
                    else:
                        await remote.exec("echo hi")
                    parts[part].append(time.perf_counter() - began)
                if part in server_s:
                    server_s[part] += server_cpu_s(server_pid) - began_cpu
        local.close()
        await remote.aclose()
    finally:
        await client.aclose()
        backend.close()
    return parts, {part: cpu / len(parts[part]) for part, cpu in server_s.items()}


def exec_parts_table(url: str, server_pid: int, quick: bool) -> Table:
    """`_exec_parts` on the one-process server at `url`, as a table (and a plain line a part)."""
    title = "what one exec is made of, 1 sandbox, 1 server process" + (" (--quick)" if quick else "")
    table = Table(title=title)
    for col in ("part", "p50 ms", "p99 ms", "server CPU ms a call", "load avg"):
        table.add_column(col, justify="right")
    parts, server_s = asyncio.run(_exec_parts(url, server_pid, 4 if quick else 12, 100 if quick else 250))
    for part, xs in parts.items():
        cpu = f"{server_s[part] * 1e3:.3f}" if part in server_s else "-"
        row = [part, f"{statistics.median(xs) * 1e3:.2f}", f"{p99(xs) * 1e3:.2f}", cpu,
               f"{os.getloadavg()[0]:.1f}"]
        table.add_row(*row)
        print(" | ".join(row), flush=True)
    route = (server_s[SERVED] - server_s[HTTP]) * 1e3
    print(f"the exec route's own server CPU (exec less a bare round trip): {route:.3f} ms", flush=True)
    return table


SERVER_PROCESSES = 2  # the cluster of each row's second column (`--processes 2`)
CLIENTS_PER_SERVER = 2  # an exec costs its client more CPU than its server (about 1 ms against 0.6)


def throughput_tables(sizes: tuple[int, ...], seconds: float, clients: int, quick: bool) -> list[Table]:
    """Execs/s on one process and on two at each size, both driven from `clients` client processes:
    the figures, which side was busy, and where the CPU went; then what one exec is made of."""
    note = " (--quick)" if quick else ""
    cores = psutil.cpu_count()
    table = Table(title=f"sandbox execs/s (echo in the session shell) from {clients} client processes; "
                        f"latencies: 1 process / {SERVER_PROCESSES} processes{note}")
    for col in ("sandboxes", "1 process", f"{SERVER_PROCESSES} processes", "x vs 1", "p50 ms", "p99 ms",
                "load avg"):
        table.add_column(col, justify="right")
    busy = Table(title=f"which side was busy, {cores} cores shared by servers and clients{note}")
    for col in ("sandboxes", "processes", "client processes", "execs/s", "servers' CPU (of a core each)",
                "clients' CPU (of a core, summed)", "execs per server CPU-s", "execs/s, a core per server",
                "x vs 1"):
        busy.add_column(col, justify="right")
    where = Table(title=f"where the CPU went: ms of CPU per exec, {cores} cores{note}")
    for col in ("sandboxes", "processes", "cores busy", "clients", "servers", "agents", "engine", "other",
                "bound, clients elsewhere"):
        where.add_column(col, justify="right")
    with ExitStack() as stack:  # both up at once: each row measures one then the other, back to back
        (url_one, pid_one), (url_two, pid_two) = (stack.enter_context(served(n, max(sizes) + 8))
                                                  for n in (1, SERVER_PROCESSES))
        for size in sizes:
            one = execs_per_s(url_one, False, size, seconds, pid_one, clients)
            two = execs_per_s(url_two, True, size, seconds, pid_two, clients)
            row = [str(size), f"{one.execs_s:,.0f}", f"{two.execs_s:,.0f}",
                   f"{two.execs_s / one.execs_s:.2f}",
                   " / ".join(f"{statistics.median(e.latencies) * 1e3:.2f}" for e in (one, two)),
                   " / ".join(f"{p99(e.latencies) * 1e3:.2f}" for e in (one, two)),
                   f"{os.getloadavg()[0]:.1f}"]
            table.add_row(*row)
            print(" | ".join(row), flush=True)  # plain: one line whatever the terminal's width
            for n, got in ((1, one), (SERVER_PROCESSES, two)):
                alone = len(got.window.server_cpu_s) * got.per_server_cpu_s  # each server process a core
                cells = [str(size), str(n), str(len(got.window.results)), f"{got.execs_s:,.0f}",
                         *got.window.busy_cells(), f"{got.per_server_cpu_s:,.0f}", f"{alone:,.0f}",
                         f"{alone / one.per_server_cpu_s:.2f}"]
                busy.add_row(*cells)
                print(" | ".join(cells), flush=True)
                cpu = got.cpu  # the execs/s the same cores would give with the clients' CPU off the machine
                bound = cores * 1e3 / max(cpu["servers"] + cpu["agents"] + cpu["engine"] + cpu["other"], 1e-9)
                cells = [str(size), str(n), f"{cpu['busy']:.0%}",
                         *(f"{cpu[k]:.2f}" for k in ("clients", "servers", "agents", "engine", "other")),
                         f"{bound:,.0f}/s"]
                where.add_row(*cells)
                print(" | ".join(cells), flush=True)
        return [table, busy, where, exec_parts_table(url_one, pid_one, quick)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 and 8 sandboxes, short windows")
    parser.add_argument("--seconds", type=float, default=None, help="measuring window per row")
    parser.add_argument("--client-processes", type=int, default=CLIENTS_PER_SERVER * SERVER_PROCESSES,
                        metavar="K", help="client processes driving each row (default: two for each server "
                                          "process of the cluster, the same for both columns: a client "
                                          "spends more CPU on an exec than its server does)")
    args = parser.parse_args()
    seconds = args.seconds or (1.5 if args.quick else 8.0)
    sizes = (1, 8) if args.quick else (1, 8, 32)
    console = Console(width=140)
    console.print(f"machine: {platform.machine()}, {os.cpu_count()} cores, "
                  f"Python {platform.python_version()}; load average at start {os.getloadavg()[0]:.1f}")
    for table in throughput_tables(sizes, seconds, args.client_processes, args.quick):
        console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
