"""Benchmark of the sandbox server on more than one core: one process against two, in one run.

    .venv/bin/python bench/sandbox_processes.py            # full run (~3 minutes on a quiet two-core machine)
    .venv/bin/python bench/sandbox_processes.py --quick    # short run (~1 minute), 1 and 8 sandboxes

Measures execs/s (`echo` in each sandbox's persistent shell, back to back) at 1, 8 and 32 live
sandboxes on one `agentrl sandbox serve` process (the baseline) and on `agentrl sandbox serve
--processes 2`, with the ratio; and the exec latency (median, p99) at 1 sandbox on each, then
what one exec at 1 sandbox is made of: the agent's own time, the host's round trip to the agent
(through the container's attach stream), an HTTP round trip to the server alone, and the whole exec. The load
comes from client processes on the same cores, as rollout workers on the machine would run them
(one per core, each an asyncio loop over its share of the sandboxes, through `AsyncSandboxClient`
for the one server and `AsyncSandboxCluster` for the two, which sends each call straight to its
sandbox's server). Each row records the load average. Loopback only; needs a Docker engine and the
sandbox image (`bash docker/engine.sh`).

Where the CPU went: every row's window is also accounted by who used the machine's cores (the
client processes, the sandbox server's processes, the agents in the containers, Docker's engine,
anything else), in CPU milliseconds per exec, with how busy the cores were. When the cores are
saturated at one process, a second process has no core to run on, and the table's bound says what
the same execs would reach with the clients on another machine (the rollout workers' usual place).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import platform
import statistics
import sys
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console
from rich.table import Table

from agentrl.sandbox_server.cluster.discovery import cpu_count
from agentrl.sandbox_server.cluster.processes import free_port

sys.path.insert(0, str(Path(__file__).resolve().parent))
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


async def _drive(url: str, cluster: bool, sandboxes: int, seconds: float, ready: Any,
                 go: Any) -> dict[str, Any]:
    """One client process: `sandboxes` sandboxes, each execing back to back for `seconds`."""
    from agentrl.sandbox_server import AsyncSandboxClient, AsyncSandboxCluster

    client: Any = AsyncSandboxCluster(url) if cluster else AsyncSandboxClient(url)
    made = await asyncio.gather(*(client.create() for _ in range(sandboxes)))
    await asyncio.gather(*(s.exec("true") for s in made))  # each shell started before the window
    ready.wait()
    go.wait()
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def loop(sandbox: Any) -> None:
        while time.perf_counter() < stop_at:
            began = time.perf_counter()
            result = await sandbox.exec("echo hi")
            latencies.append(time.perf_counter() - began)
            assert result.stdout == "hi\n", result

    began, cpu_began = time.perf_counter(), time.process_time()
    await asyncio.gather(*(loop(s) for s in made))
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu_began
    await asyncio.gather(*(s.aclose() for s in made))
    await client.aclose()
    return {"execs": len(latencies), "elapsed": elapsed, "latencies": latencies, "cpu_s": cpu}


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


def _client(url: str, cluster: bool, sandboxes: int, seconds: float, ready: Any, go: Any, out: Any) -> None:
    out.put(asyncio.run(_drive(url, cluster, sandboxes, seconds, ready, go)))


def execs_per_s(url: str, cluster: bool, sandboxes: int, seconds: float,
                server_pid: int) -> tuple[float, list[float], dict[str, float]]:
    """Execs/s of `sandboxes` sandboxes driven by up to one client process per core, the
    latencies (s) of every exec, and the window's CPU per exec (ms) by part, with the cores' busy
    share."""
    ctx = multiprocessing.get_context("spawn")
    clients = max(1, min(sandboxes, cpu_count()))
    shares = [sandboxes // clients + (i < sandboxes % clients) for i in range(clients)]
    ready, go, out = ctx.Barrier(clients + 1), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_client, args=(url, cluster, n, seconds, ready, go, out)) for n in shares]
    for p in procs:
        p.start()
    ready.wait(timeout=START_TIMEOUT_S)  # every sandbox made and its shell started
    before, began = _cpu_by_part(server_pid), time.perf_counter()
    go.set()
    got = [out.get(timeout=START_TIMEOUT_S + seconds) for _ in procs]
    after, wall = _cpu_by_part(server_pid), time.perf_counter() - began
    for p in procs:
        p.join(timeout=60)
    rate = sum(g["execs"] / g["elapsed"] for g in got)
    execs = sum(g["execs"] for g in got)
    cpu = {part: (after[part] - before[part]) * 1e3 / execs for part in after}
    cpu["clients"] = sum(g["cpu_s"] for g in got) * 1e3 / execs
    cpu["other"] = cpu.pop("machine") - sum(cpu.values())
    cpu["busy"] = (after["machine"] - before["machine"]) / (wall * psutil.cpu_count())
    return rate, [x for g in got for x in g["latencies"]], cpu


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 and 8 sandboxes, short windows")
    parser.add_argument("--seconds", type=float, default=None, help="measuring window per row")
    args = parser.parse_args()
    seconds = args.seconds or (1.5 if args.quick else 8.0)
    sizes = (1, 8) if args.quick else (1, 8, 32)
    console = Console(width=140)
    console.print(f"machine: {platform.machine()}, {os.cpu_count()} cores, "
                  f"Python {platform.python_version()}; load average at start {os.getloadavg()[0]:.1f}")
    table = Table(title="sandbox execs/s (echo in the session shell); latencies: 1 process / 2 processes"
                  + (" (--quick)" if args.quick else ""))
    for col in ("sandboxes", "1 process", "2 processes", "x vs 1", "p50 ms", "p99 ms", "load avg"):
        table.add_column(col, justify="right")
    cores = psutil.cpu_count()
    where = Table(title=f"where the CPU went: ms of CPU per exec, {cores} cores"
                  + (" (--quick)" if args.quick else ""))
    for col in ("sandboxes", "processes", "cores busy", "clients", "servers", "agents", "engine", "other",
                "bound, clients elsewhere"):
        where.add_column(col, justify="right")
    with ExitStack() as stack:  # both up at once: each row measures one then the other, back to back
        (url_one, pid_one), (url_two, pid_two) = (stack.enter_context(served(n, max(sizes) + 8))
                                                  for n in (1, 2))
        for size in sizes:
            one, lat_one, cpu_one = execs_per_s(url_one, False, size, seconds, pid_one)
            two, lat_two, cpu_two = execs_per_s(url_two, True, size, seconds, pid_two)
            row = [str(size), f"{one:,.0f}", f"{two:,.0f}", f"{two / one:.2f}",
                   f"{statistics.median(lat_one) * 1e3:.2f} / {statistics.median(lat_two) * 1e3:.2f}",
                   f"{p99(lat_one) * 1e3:.2f} / {p99(lat_two) * 1e3:.2f}", f"{os.getloadavg()[0]:.1f}"]
            table.add_row(*row)
            console.print(" | ".join(row))
            for n, cpu in ((1, cpu_one), (2, cpu_two)):
                # the execs/s the same cores would give with the clients' CPU moved off the machine
                bound = cores * 1e3 / max(cpu["servers"] + cpu["agents"] + cpu["engine"] + cpu["other"], 1e-9)
                cells = [str(size), str(n), f"{cpu['busy']:.0%}",
                         *(f"{cpu[k]:.2f}" for k in ("clients", "servers", "agents", "engine", "other")),
                         f"{bound:,.0f}/s"]
                where.add_row(*cells)
                console.print(" | ".join(cells))
        parts = exec_parts_table(url_one, pid_one, args.quick)
    console.print(table)
    console.print(where)
    console.print(parts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
