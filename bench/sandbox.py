"""Sandbox benchmark: create, exec, /run_code, big output and throughput, against baselines run here.

    python bench/sandbox.py            # full run (a few minutes)
    python bench/sandbox.py --quick    # fewer repetitions

Baselines measured in the same run: a container start (cold create), `docker exec` through the CLI
and through the SDK, SWE-ReX's `run_in_session` (its server on 127.0.0.1, if `swe-rex` is installed),
python3 started on the host and through `docker exec` (for /run_code). The server's peak memory
under 50 MB output floods is read from its own process.
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
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from agentrl.sandbox_server.sandboxes.docker_backend import DockerBackend

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measuring import p99, peak_rss_mib  # bench/measuring.py: a p99 and a process's peak RSS

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


def bench_swerex(reps: int) -> list[float] | str:
    """SWE-ReX's session latency, or why it could not be measured (shown in the table)."""
    try:
        from swerex.runtime.abstract import BashAction, CreateBashSessionRequest
        from swerex.runtime.remote import RemoteRuntime
    except ImportError:
        return "swe-rex not installed"
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
    except Exception as exc:  # the baseline's own failure is reported, not ours
        return f"swe-rex failed: {type(exc).__name__}"
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


POOL_SIZE = 4


def wait_warm(client: httpx.Client, size: int, timeout_s: float = 120.0) -> None:
    """Wait until the server's warm pool holds `size` containers: timings are taken with no
    container starting in the background (a start takes a core for about a second)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in client.get("/metrics").text.splitlines():
            if line.startswith("agentrl_warm_containers ") and float(line.split()[1]) >= size:
                return
        time.sleep(0.1)


def bench_server(reps: int) -> dict[str, object]:
    """/run_code latency and the server's peak memory under floods, against `agentrl sandbox serve`
    started as its own process (so its memory is its own)."""
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentrl",
            "sandbox",
            "serve",
            "--port",
            str(port),
            "--pool-size",
            str(POOL_SIZE),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    out: dict[str, object] = {}
    try:
        with httpx.Client(base_url=url, timeout=120) as client:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if client.get("/v1/ping").text == "pong":
                        break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the sandbox server did not start") from None
                    time.sleep(0.2)
            call = {"code": "print(1)", "language": "python"}
            for _ in range(16):  # warm-up: the runners exist
                client.post("/run_code", json=call)
            wait_warm(client, POOL_SIZE)  # and the containers they took from the pool are replaced
            times = []
            for _ in range(reps):
                start = time.perf_counter()
                reply = client.post("/run_code", json=call).json()
                times.append((time.perf_counter() - start) * 1000.0)
                assert reply["run_result"]["stdout"] == "1\n", reply
            out["run_code"] = times
            sid = client.post("/v1/sandboxes", json={}).json()["sandbox_id"]
            flood = "python3 -c \"print('x' * 50_000_000)\""
            client.post(f"/v1/sandboxes/{sid}/exec", json={"command": "true"})
            before = peak_rss_mib(server.pid)
            for mode in ("session", "oneshot"):
                reply = client.post(
                    f"/v1/sandboxes/{sid}/exec", json={"command": flood, "mode": mode, "timeout_s": 60}
                ).json()
                assert reply["truncated"] and reply["stdout_bytes"] == 50_000_001, reply["status"]
            start = time.perf_counter()
            big = {"code": "print('x' * 50_000_000)", "run_timeout": 60}
            reply = client.post("/run_code", json=big).json()
            out["big_ms"] = (time.perf_counter() - start) * 1000.0
            assert reply["status"] == "Success", reply["status"]
            out["rss_before"], out["rss_after"] = before, peak_rss_mib(server.pid)
            upload = os.urandom(60 << 20)
            start = time.perf_counter()
            put = client.put(f"/v1/sandboxes/{sid}/files", params={"path": "upload"}, content=upload)
            put.raise_for_status()
            out["upload_ms"] = (time.perf_counter() - start) * 1000.0
            out["rss_upload"] = peak_rss_mib(server.pid)
            client.delete(f"/v1/sandboxes/{sid}")
    finally:
        server.terminate()
        server.wait(60)
    return out


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
        if not isinstance(swerex, str):
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
            rows.append(("session exec", f"{median(agent):.2f} ms", swerex, "-"))

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

    with console.status("/run_code and server memory"):
        served = bench_server(n_slow * 3)
    run_code, run_code_big = served["run_code"], served["big_ms"]
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
    with DockerBackend(pool_size=0) as backend, backend.create() as sb:
        cid = backend._sandboxes[sb.sandbox_id][1]
        docker_py = timings(
            lambda: subprocess.run(
                ["docker", "exec", cid, "python3", "-c", "print(1)"], capture_output=True, check=True
            ),
            n_slow,
        )
    for name, base in (("python3 started on the host, unisolated", host), ("docker exec python3", docker_py)):
        rows.append(
            (
                "/run_code print(1) (median)",
                f"{median(run_code):.1f} ms",
                f"{median(base):.1f} ms {name}",
                f"{median(base) / median(run_code):.2f}x",
            )
        )
        rows.append(
            (
                "/run_code print(1) (p99)",
                f"{p99(run_code):.1f} ms",
                f"{p99(base):.1f} ms {name}",
                f"{p99(base) / p99(run_code):.2f}x",
            )
        )
    rows.append(
        (
            "/run_code 50 MB print",
            f"{run_code_big:.0f} ms",
            "10 s time-out in SandboxFusion (quoted)",
            f"{10000 / run_code_big:.0f}x",
        )
    )
    rows.append(
        (
            "server peak RSS, then a 60 MB upload",
            f"{served['rss_upload']:.0f} MB",
            f"{served['rss_after']:.0f} MB before it ({served['upload_ms']:.0f} ms to upload)",
            f"+{served['rss_upload'] - served['rss_after']:.0f} MB",
        )
    )
    rows.append(
        (
            "server peak RSS, 3 x 50 MB of output",
            f"{served['rss_after']:.0f} MB",
            f"{served['rss_before']:.0f} MB before the floods",
            f"+{served['rss_after'] - served['rss_before']:.0f} MB",
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
