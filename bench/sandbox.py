"""Sandbox benchmark: create, exec, /run_code, big output and throughput, against baselines run here.

    python bench/sandbox.py            # full run (a few minutes)
    python bench/sandbox.py --quick    # fewer repetitions

Baselines measured in the same run: a container start (cold create), `docker exec` through the CLI
and through the SDK, SWE-ReX's `run_in_session` (its server on 127.0.0.1, if `swe-rex` is installed).
Needs a Docker engine and the sandbox image (`bash docker/engine.sh`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import httpx
from rich.console import Console
from rich.table import Table

from agentrl.sandbox_server.docker_backend import DockerBackend

console = Console()


def timings(fn: Callable[[], object], n: int) -> list[float]:
    """Milliseconds per call of `fn`, `n` calls."""
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000.0)
    return out


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def p99(xs: list[float]) -> float:
    return sorted(xs)[min(len(xs) - 1, round(0.99 * (len(xs) - 1)))]


def wait_pool(backend: DockerBackend, size: int, timeout_s: float = 120.0) -> None:
    queue = backend._pool[backend._key(backend.defaults)]
    deadline = time.monotonic() + timeout_s
    while len(queue) < size and time.monotonic() < deadline:
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench_create(reps: int) -> tuple[list[float], list[float]]:
    with DockerBackend(pool_size=0) as cold_backend:
        cold = timings(lambda: cold_backend.create().close(), reps)
    warm: list[float] = []
    with DockerBackend(pool_size=4) as warm_backend:
        while len(warm) < reps:
            wait_pool(warm_backend, 4)
            for _ in range(min(4, reps - len(warm))):
                start = time.perf_counter()
                sb = warm_backend.create()
                warm.append((time.perf_counter() - start) * 1000.0)
                sb.close()
    return cold, warm


def bench_swerex(reps: int) -> list[float] | None:
    try:
        from swerex.runtime.abstract import BashAction, CreateBashSessionRequest
        from swerex.runtime.remote import RemoteRuntime
    except ImportError:
        return None
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "swerex.server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--auth-token",
            "t",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    async def run() -> list[float]:
        runtime = RemoteRuntime(host="http://127.0.0.1", port=port, auth_token="t")
        deadline = time.monotonic() + 60
        while not await runtime.is_alive():
            if time.monotonic() > deadline:
                raise RuntimeError("swe-rex server did not start")
            await asyncio.sleep(0.2)
        await runtime.create_session(CreateBashSessionRequest())
        out = []
        for _ in range(reps):
            start = time.perf_counter()
            await runtime.run_in_session(BashAction(command="echo hi"))
            out.append((time.perf_counter() - start) * 1000.0)
        await runtime.close()
        return out

    try:
        return asyncio.run(run())
    finally:
        server.terminate()
        server.wait()


def bench_throughput(backend: DockerBackend, concurrency: int, seconds: float) -> float:
    sandboxes = [backend.create() for _ in range(concurrency)]
    counts = [0] * concurrency
    errors: list[str] = []
    stop = threading.Event()

    def loop(i: int) -> None:
        while not stop.is_set():
            result = sandboxes[i].exec("echo hi")
            if result.status != "ok":
                errors.append(result.status)
            counts[i] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    for sb in sandboxes:
        sb.close()
    if errors:
        raise RuntimeError(f"{len(errors)} failed execs at concurrency {concurrency}")
    return sum(counts) / elapsed


def bench_run_code(reps: int) -> tuple[list[float], float]:
    import uvicorn

    from agentrl.sandbox_server.app import create_app

    backend = DockerBackend(pool_size=4)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(backend), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    url = f"http://127.0.0.1:{port}/run_code"
    out = []
    big_ms = 0.0
    try:
        with httpx.Client(timeout=120) as client:
            client.post(url, json={"code": "print(1)", "language": "python"})  # warm-up: first runner
            for _ in range(reps):
                start = time.perf_counter()
                reply = client.post(url, json={"code": "print(1)", "language": "python"}).json()
                out.append((time.perf_counter() - start) * 1000.0)
                assert reply["run_result"]["stdout"] == "1\n", reply
            start = time.perf_counter()
            reply = client.post(url, json={"code": "print('x' * 50_000_000)", "run_timeout": 60}).json()
            big_ms = (time.perf_counter() - start) * 1000.0
            assert reply["status"] == "Success", reply["status"]
    finally:
        server.should_exit = True
        thread.join(10)
        backend.close()
    return out, big_ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    q = args.quick
    n_exec, n_slow, n_create, seconds = (200, 20, 6, 1.0) if q else (1000, 60, 20, 3.0)

    import docker

    info = docker.from_env().info()
    console.print(
        f"[bold]machine[/]: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, {platform.platform()}, "
        f"Python {platform.python_version()}, Docker {info.get('ServerVersion')}, "
        f"cgroup v{info.get('CgroupVersion', '?')}"
    )
    rows: list[tuple[str, str, str, str]] = []

    with console.status("create latency (cold vs warm pool)"):
        cold, warm = bench_create(n_create)
    rows.append(
        (
            "create (median)",
            f"{median(warm):.2f} ms warm pool",
            f"{median(cold):.1f} ms cold start",
            f"{median(cold) / median(warm):.0f}x",
        )
    )

    with DockerBackend(pool_size=2) as backend:
        sb = backend.create()
        with console.status("exec latency"):
            sb.exec("echo warm-up")
            agent = timings(lambda: sb.exec("echo hi"), n_exec)
            cid = backend._sandboxes[sb.sandbox_id][1]
            cli = timings(
                lambda: subprocess.run(
                    ["docker", "exec", cid, "echo", "hi"], capture_output=True, check=True
                ),
                n_slow,
            )
            sdk = timings(
                lambda: backend.docker.api.exec_start(backend.docker.api.exec_create(cid, ["echo", "hi"])),
                n_slow,
            )
        rows.append(
            (
                "exec echo hi (median)",
                f"{median(agent):.2f} ms",
                f"{median(cli):.1f} ms docker exec CLI",
                f"{median(cli) / median(agent):.0f}x",
            )
        )
        rows.append(
            (
                "exec echo hi (p99)",
                f"{p99(agent):.2f} ms",
                f"{p99(cli):.1f} ms docker exec CLI",
                f"{p99(cli) / p99(agent):.0f}x",
            )
        )
        rows.append(
            (
                "exec echo hi (median)",
                f"{median(agent):.2f} ms",
                f"{median(sdk):.1f} ms docker SDK exec",
                f"{median(sdk) / median(agent):.0f}x",
            )
        )
        with console.status("SWE-ReX run_in_session"):
            swerex = bench_swerex(n_slow)
        if swerex:
            rows.append(
                (
                    "session exec (median)",
                    f"{median(agent):.2f} ms",
                    f"{median(swerex):.1f} ms SWE-ReX run_in_session",
                    f"{median(swerex) / median(agent):.0f}x",
                )
            )
            rows.append(
                (
                    "session exec (p99)",
                    f"{p99(agent):.2f} ms",
                    f"{p99(swerex):.1f} ms SWE-ReX run_in_session",
                    f"{p99(swerex) / p99(agent):.0f}x",
                )
            )
        else:
            rows.append(("session exec", f"{median(agent):.2f} ms", "swe-rex not installed", "-"))

        with console.status("50 MB of output"):
            start = time.perf_counter()
            big = sb.exec("python3 -c \"print('x' * 50_000_000)\"", timeout_s=60)
            big_ms = (time.perf_counter() - start) * 1000.0
            start = time.perf_counter()
            subprocess.run(
                ["docker", "exec", cid, "python3", "-c", "print('x' * 50_000_000)"],
                capture_output=True,
                check=True,
            )
            big_cli_ms = (time.perf_counter() - start) * 1000.0
        assert big.truncated and big.stdout_bytes == 50_000_001
        rows.append(
            (
                "50 MB print answered",
                f"{big_ms:.0f} ms (truncated, counted)",
                f"{big_cli_ms:.0f} ms docker exec CLI (whole)",
                f"{big_cli_ms / big_ms:.1f}x",
            )
        )
        sb.close()

        throughput = {}
        for concurrency in (1, 8, 32):
            with console.status(f"throughput at {concurrency} sandboxes"):
                throughput[concurrency] = bench_throughput(backend, concurrency, seconds)
        for concurrency, rate in throughput.items():
            rows.append(
                (
                    f"execs/s, {concurrency} sandboxes",
                    f"{rate:.0f}/s",
                    f"{throughput[1]:.0f}/s at 1 sandbox",
                    f"{rate / throughput[1]:.2f}x",
                )
            )

    with console.status("/run_code"):
        run_code, run_code_big = bench_run_code(n_slow)
    rows.append(
        (
            "/run_code print(1) (median)",
            f"{median(run_code):.1f} ms",
            "22 ms SandboxFusion (unisolated, quoted, not run here)",
            f"{22 / median(run_code):.2f}x",
        )
    )
    # what an unisolated runner such as SandboxFusion's default mode does per call: start python3 on the host
    host = timings(
        lambda: subprocess.run(["python3", "-c", "print(1)"], capture_output=True, check=True), n_slow
    )
    rows.append(
        (
            "/run_code print(1) (median)",
            f"{median(run_code):.1f} ms",
            f"{median(host):.1f} ms python3 started on the host, unisolated",
            f"{median(host) / median(run_code):.2f}x",
        )
    )
    rows.append(
        ("/run_code print(1) (p99)", f"{p99(run_code):.1f} ms", f"{p99(host):.1f} ms host python3", "-")
    )
    rows.append(
        (
            "/run_code 50 MB print",
            f"{run_code_big:.0f} ms",
            "10 s time-out in SandboxFusion (quoted)",
            f"{10000 / run_code_big:.0f}x",
        )
    )

    table = Table(title="agentrl sandbox" + (" (--quick)" if q else ""))
    for column in ("measure", "agentrl", "baseline (same run unless quoted)", "ratio"):
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
