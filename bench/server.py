"""Benchmark of `agentrl serve` and its public clients against OpenEnv's own server, in one run.

    .venv/bin/python bench/server.py            # full run (~5 minutes on a quiet machine)
    .venv/bin/python bench/server.py --quick    # short run (~2 minutes), Flights-v0 at 1 and 64 sessions

Measures, for Echo-v0 and Flights-v0 on one `agentrl serve` process: (1) the latency of one episode
stepped back to back in-process, through `RemoteEnv` (sync) and through `AsyncEnvClient`, in turns
of a few steps each, whose difference is the per-step overhead; (2) steps/s with p50/p99 step
latency at 1, 64 and 512 concurrent episodes through `AsyncEnvClient`, one coroutine per episode
awaiting `step` (the way every framework drives episodes) and one `step_batch` request per round;
and, for Echo, agentrl's OpenEnv-compatible `/ws` driven by OpenEnv's own client. The baseline is
the echo env generated from OpenEnv's env template, served by OpenEnv's `create_app` and driven by
its async `EnvClient` over `/ws`, one connection per session spread over `--client-procs` processes
that measure together. Last, (3) a token holder's step p99 while one caller without the token
attacks a server of its own, beside the same p99 with no attacker (`bench/preauth.py`).

Servers run pinned to the first core and every client to the others (`taskset`), so that the two
sides never take turns on one core; each row records the load average and the CPU the server process
spent per step while measured, and the slowest and fastest 100 ms of the row. The same fixed work
timed on the server's core before and after the run shows how much this machine's speed swings (a
shared virtual machine's core can run at half speed for a fraction of a second, which then shows in
every figure, p99 first). The client processes, OpenEnv's included, collect garbage as `agentrl
serve` does (`agentrl.server.collector.short_pauses`), as a rollout worker stepping hundreds of
episodes should. Everything talks over loopback only. The servers are `bench/serving.py`'s and the
machine's description `bench/measuring.py`'s, shared with `bench/episodes.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

import agentrl  # noqa: F401  (registers the envs)
from agentrl.client import AsyncEnvClient, RemoteEnv
from agentrl.registration import make_env
from agentrl.server import collector
from agentrl.server.local import free_port

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measuring import (  # bench/measuring.py: the machine, its load, the pinning, a process's CPU
    load,
    machine,
    pin_cores,
    server_cpu_s,
    speed_swings,
    yes,
)
from preauth import attack_table, under_attack  # bench/preauth.py: the attackers
from serving import (  # bench/serving.py: the servers and the actions
    ECHO,
    FLIGHTS,
    OPENENV,
    action_for,
    agentrl_server,
    call,
    openenv_server,
    openenv_template,
    operator_kwargs,
)

OPENENV_PATH = "OpenEnv client · OpenEnv create_app /ws"
PATHS = {False: "AsyncEnvClient.step · /v1/ws", True: "AsyncEnvClient.step_batch · /v1/step"}
REMOTE_PATH = "RemoteEnv.step (sync) · /v1/ws"
WS_PATH = "OpenEnv client · agentrl /ws"
LONG = {"max_turns": 10**9}  # episodes must not end while being measured
BLOCK = 25  # steps of one way in a turn of the per-step overhead measurement
WINDOW_S = 0.1  # the span over which a row's rate is also counted, to show its swings
console = Console(width=150)


# --- measurement ---------------------------------------------------------------------------------
@dataclass
class Row:
    env: str
    path: str
    sessions: int
    steps: int
    seconds: float
    latencies: np.ndarray
    error: str | None = None
    load: str = ""  # the load average when the row was measured
    server_cpu_s: float = float("nan")  # CPU the server process used during the row
    windows: np.ndarray | None = None  # steps answered in each WINDOW_S (one client process only)

    @property
    def rate(self) -> float:
        return self.steps / self.seconds

    def window_rates(self) -> str:
        """The slowest and fastest `WINDOW_S` of the row, in steps/s: whether its tail is a stall of
        the whole run (the machine's speed swings) rather than some steps waiting longer than others."""
        if self.windows is None or len(self.windows) < 2:
            return ""
        low, high = self.windows.min() / WINDOW_S, self.windows.max() / WINDOW_S
        return f"; {WINDOW_S * 1000:.0f} ms windows {low:,.0f} to {high:,.0f} steps/s"

    def pct(self, q: float) -> float:
        return float(np.percentile(self.latencies, q) * 1000)


async def sessions_loop(
    n: int, seconds: float, step_fns: list[Callable[[], Awaitable[Any]]]
) -> tuple[int, float, np.ndarray, np.ndarray]:
    """Each session steps back to back until the deadline; returns steps, wall time, latencies, and
    the steps answered in each `WINDOW_S` of the run (the last, partial one left out)."""
    lat: list[list[float]] = [[] for _ in range(n)]
    ends: list[float] = []
    start = time.perf_counter()
    deadline = start + seconds

    async def run(i: int) -> None:
        fn, mine = step_fns[i], lat[i]
        while time.perf_counter() < deadline:
            t = time.perf_counter()
            await fn()
            done = time.perf_counter()
            mine.append(done - t)
            ends.append(done)

    await asyncio.gather(*(run(i) for i in range(n)))
    wall = time.perf_counter() - start
    flat = np.array([x for xs in lat for x in xs])
    windows = np.bincount(((np.array(ends) - start) // WINDOW_S).astype(int))[: int(seconds // WINDOW_S)]
    return len(flat), wall, flat, windows


_START: Any = None  # in a client process of `spread`: the barrier every process meets before measuring
_SERVER_PID = 0  # the server of the row being measured, whose CPU `measured` reads


async def measured(n: int, seconds: float, step_fns: list[Callable[[], Awaitable[Any]]]
                   ) -> tuple[int, float, np.ndarray, float, np.ndarray]:
    """A short unmeasured warm-up (connections, caches, the server's cost estimates), then the run;
    returns steps, wall time, latencies, the server's CPU seconds over the run alone (not over
    the episodes' creation), and the steps answered in each `WINDOW_S`."""
    await sessions_loop(n, min(0.5, seconds / 4), step_fns)
    if _START is not None:
        await asyncio.to_thread(_START.wait, 300)
    cpu = server_cpu_s(_SERVER_PID)
    steps, wall, lat, windows = await sessions_loop(n, seconds, step_fns)
    return steps, wall, lat, server_cpu_s(_SERVER_PID) - cpu, windows


def spread(make: Callable[[int], Awaitable[Row]], n: int, procs: int,
           run: Callable[[Awaitable[Row]], Row]) -> Row:
    """Run `n` sessions split over `procs` forked client processes that measure at the same time;
    steps/s is the sum of theirs and the latencies are pooled."""
    procs = max(1, min(procs, n))
    if procs == 1:
        return run(make(n))
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(procs), ctx.Queue()

    def child(size: int) -> None:
        global _START
        _START = barrier
        try:
            results.put(run(make(size)))
        except BaseException as exc:
            barrier.abort()
            results.put(f"{type(exc).__name__}: {exc}")

    workers = [ctx.Process(target=child, args=(n // procs + (i < n % procs),)) for i in range(procs)]
    for w in workers:
        w.start()
    rows = [results.get(timeout=600) for _ in workers]
    for w in workers:
        w.join(timeout=30)
    errors = [r for r in rows if isinstance(r, str)]
    if errors:
        raise RuntimeError(errors[0])
    steps, rate = sum(r.steps for r in rows), sum(r.rate for r in rows)
    return Row(rows[0].env, rows[0].path, n, steps, steps / rate, np.concatenate([r.latencies for r in rows]),
               server_cpu_s=max(r.server_cpu_s for r in rows))  # the processes measure at the same time


async def bench_async(url: str, env_id: str, n: int, seconds: float, batched: bool) -> Row:
    """The public `AsyncEnvClient` in one process, as a framework uses it: one coroutine per episode
    awaiting `step` (its steps coalesce over `/v1/ws`), or one `step_batch` request per round."""
    async with AsyncEnvClient(url, timeout=120, max_connections=64) as client:
        gate = asyncio.Semaphore(64)

        async def create(seed: int) -> tuple[str, str]:
            async with gate:
                created = await client.create_episode(env_id, seed=seed, env_kwargs=LONG)
                return created.episode_id, action_for(env_id, created.info)

        episodes = await asyncio.gather(*(create(seed) for seed in range(n)))
        if batched:

            async def one_round() -> None:
                results = await client.step_batch(episodes)
                assert all(not isinstance(r, Exception) for r in results), results[0]

            steps, wall, lat, cpu, windows = await measured(1, seconds, [one_round])
            lat = np.repeat(lat, n)  # every step of a round waited the round's latency
            steps, windows = steps * n, windows * n
        else:
            fns = [lambda e=e, a=a: client.step(e, a) for e, a in episodes]
            steps, wall, lat, cpu, windows = await measured(n, seconds, fns)
        await asyncio.gather(*(client.close_episode(e) for e, _ in episodes))
    return Row(env_id, PATHS[batched], n, steps, wall, lat, server_cpu_s=cpu, windows=windows)


async def bench_ws(
    make_client: Callable[[], Any],
    reset_kwargs: Callable[[int], dict[str, Any]],
    action: Callable[[Any], Any],
    n: int,
    seconds: float,
    env: str,
    path: str,
) -> Row:
    clients = [make_client() for _ in range(n)]
    gate = asyncio.Semaphore(64)

    async def open_one(i: int) -> Any:
        async with gate:
            await clients[i].connect()
            result = await clients[i].reset(**reset_kwargs(i))
            return action(result)

    actions = await asyncio.gather(*(open_one(i) for i in range(n)))
    fns = [lambda c=c, a=a: c.step(a) for c, a in zip(clients, actions, strict=True)]
    steps, wall, lat, cpu, windows = await measured(n, seconds, fns)
    await asyncio.gather(*(c.close() for c in clients))
    return Row(env, path, n, steps, wall, lat, server_cpu_s=cpu, windows=windows)


def overhead(url: str, server_pid: int, env_id: str, steps: int, run: Callable[[Awaitable[Any]], Any]
             ) -> tuple[dict[str, np.ndarray], Row]:
    """Sequential step latency on one long episode each, in-process, through `RemoteEnv` (sync) and
    through `AsyncEnvClient`, stepped in turns of `BLOCK` steps each: this machine's speed swings
    (a core runs the same work up to twice as slowly for a fraction of a second) then fall on all
    three alike, and their difference is the overhead. The `RemoteEnv` steps also make its
    1-session throughput row, with the server's CPU over its turns alone."""
    local = make_env(env_id, **LONG, **operator_kwargs(env_id))
    _, info = local.reset(seed=0)
    act = action_for(env_id, info)
    remote = RemoteEnv(env_id, base_url=url, **LONG)
    remote.reset(seed=0)

    remote_cpu = 0.0

    async def in_turns() -> dict[str, list[float]]:
        nonlocal remote_cpu
        out: dict[str, list[float]] = {"local": [], "remote": [], "async": []}
        async with AsyncEnvClient(url) as client:
            eid = (await client.create_episode(env_id, seed=0, env_kwargs=LONG)).episode_id

            async def step_async() -> None:
                await client.step(eid, act)

            async def step_local() -> None:
                local.step(act)

            async def step_remote() -> None:
                remote.step(act)

            ways = {"local": step_local, "remote": step_remote, "async": step_async}
            for turn in range(-1, steps // BLOCK):  # the first turn warms up (statements, caches)
                for name, fn in ways.items():
                    cpu = server_cpu_s(server_pid)
                    for _ in range(BLOCK):
                        t = time.perf_counter()
                        await fn()
                        if turn >= 0:
                            out[name].append(time.perf_counter() - t)
                    if turn >= 0 and name == "remote":
                        remote_cpu += server_cpu_s(server_pid) - cpu
            await client.close_episode(eid)
        return out

    lat = {name: np.array(values) for name, values in run(in_turns()).items()}
    local.close()
    remote.close()
    row = Row(env_id, REMOTE_PATH, 1, len(lat["remote"]), float(lat["remote"].sum()), lat["remote"],
              server_cpu_s=remote_cpu)
    return lat, row


def in_process_rate(env_id: str, prefix: list[str], steps: int = 300, sessions: int = 1) -> float:
    """Steps/s of `sessions` episodes (seeds 0 to sessions - 1, as in the rows) stepped in turn in a
    fresh process on the server's core (`prefix` pins it there): what the env's own step allows one
    server process, measured beside its row. Each episode's median step, averaged over the episodes:
    the median keeps a busy machine's outliers out, the mean keeps the seeds' different costs (a
    Flights-v0 search returns more rows for some seeds than for seed 0)."""
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import numpy as np; "
            f"from server import LONG, action_for, in_turn, make_env, operator_kwargs; "
            f"envs = [make_env({env_id!r}, **LONG, **operator_kwargs({env_id!r})) "
            f"for _ in range({sessions})]; acts = [action_for({env_id!r}, e.reset(seed=i)[1]) "
            f"for i, e in enumerate(envs)]; lat = in_turn(envs, acts, max(9, {steps} // {sessions})); "
            f"print(1 / float(np.mean(np.median(lat, axis=0))))")
    out = subprocess.run([*prefix, sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    return float(out.stdout.strip().splitlines()[-1])


def in_turn(envs: list[Any], actions: list[str], rounds: int) -> np.ndarray:
    """Seconds of each step, [round, episode], of episodes stepped in turn after every one is warm
    (a fresh Flights-v0 episode's first steps prepare its statements: 1 to 13 ms, later ~0.25 ms)."""
    for _ in range(max(2, 50 // len(envs))):
        for env, a in zip(envs, actions, strict=True):
            env.step(a)
    out = np.empty((rounds, len(envs)))
    for r in range(rounds):
        for i, (env, a) in enumerate(zip(envs, actions, strict=True)):
            t = time.perf_counter()
            env.step(a)
            out[r, i] = time.perf_counter() - t
    return out


# --- main ----------------------------------------------------------------------------------------
def main() -> int:
    # the client processes (this one and those forked from it) collect garbage as the server does:
    # with hundreds of episodes stepping, a full collection over a client's heap holds all of them
    with collector.short_pauses():
        return measure()


def measure() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short measurements (~2 minutes in all)")
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 64, 512])
    parser.add_argument("--client-procs", type=int, default=max(1, min(4, (os.cpu_count() or 2) // 2)),
                        help="client processes for the OpenEnv client rows, one connection per session "
                             "(default: half the cores, 1 to 4; the server needs cores too)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin servers and clients to cores")
    args = parser.parse_args()
    seconds = 1.5 if args.quick else 4.0
    overhead_steps = 500 if args.quick else 3000
    try:
        import uvloop  # the clients get the same fast loop as both servers

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    prefix, pinning = pin_cores(not args.no_pin)
    console.print(f"[bold]machine[/]: {machine()}; {pinning}")
    console.print(f"[bold]speed before[/]: {speed_swings(prefix)}")
    rows: list[Row] = []

    def add(env: str, path: str, n: int, make: Callable[[int], Awaitable[Row]], server_pid: int,
            procs: int = 1) -> None:
        procs = max(1, min(procs, n))
        clients = f"{procs} client process{'es' if procs > 1 else ''}"
        console.print(f"{env} · {path} · {n} sessions ({clients}) ...")
        global _SERVER_PID
        _SERVER_PID = server_pid
        try:
            row = spread(make, n, procs, run)
        except Exception as exc:  # one failing configuration must not lose the others' figures
            row = Row(env, path, n, 0, 1.0, np.array([np.nan]), f"{type(exc).__name__}: {exc}"[:80])
            console.print(f"  [red]failed[/]: {row.error}")
        else:
            row.load = load()
            console.print(f"  {row.rate:,.0f} steps/s, p50 {row.pct(50):.2f} ms, p99 {row.pct(99):.2f} ms "
                          f"(load {row.load}{row.window_rates()})")
        rows.append(row)

    over: dict[str, dict[str, np.ndarray]] = {}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    from openenv.core.generic_client import GenericEnvClient

    with tempfile.TemporaryDirectory() as tmp, agentrl_server(port, prefix) as server:
        workdir = openenv_template(Path(tmp))
        sys.path.insert(0, str(workdir))
        from bench_echo.client import BenchEchoEnv
        from bench_echo.models import BenchEchoAction

        for env_id in (ECHO, FLIGHTS):
            console.print(f"{env_id}: per-step overhead ...")
            over[env_id], remote_row = overhead(url, server.pid, env_id, overhead_steps, run)
            remote_row.load = load()
            rows.append(remote_row)
        # each OpenEnv row next to agentrl's at the same size, so that both see the same machine load
        for n in args.sessions:
            add(ECHO, PATHS[False], n, lambda k: bench_async(url, ECHO, k, seconds, batched=False),
                server.pid)
            oport = free_port()  # a fresh OpenEnv server per size: a used one stalls new handshakes
            with openenv_server(workdir, oport, prefix) as baseline:
                add(OPENENV, OPENENV_PATH, n, lambda k, p=oport: bench_ws(
                    lambda: BenchEchoEnv(base_url=f"http://127.0.0.1:{p}", connect_timeout_s=120),
                    lambda i: {}, lambda r: BenchEchoAction(message="hello"),
                    k, seconds, OPENENV, OPENENV_PATH), baseline.pid, args.client_procs)
            add(ECHO, PATHS[True], n, lambda k: bench_async(url, ECHO, k, seconds, batched=True), server.pid)
            add(ECHO, WS_PATH, n, lambda k: bench_ws(
                lambda: GenericEnvClient(base_url=f"{url}/openenv/{ECHO}", connect_timeout_s=120),
                lambda i: {"seed": i, "env_kwargs": LONG},
                lambda r: {"action": call("echo", text="hello")},
                k, seconds, ECHO, WS_PATH), server.pid, args.client_procs)
        # --quick leaves out Flights at 512: building 512 worlds twice takes longer than the rest of the run
        flights_sessions = [n for n in args.sessions if not args.quick or n <= 64]
        allowance = in_process_rate(FLIGHTS, prefix)
        allowance_64 = in_process_rate(FLIGHTS, prefix, sessions=64)
        console.print(f"{FLIGHTS} in-process on the server's core: {allowance:,.0f} steps/s (one episode), "
                      f"{allowance_64:,.0f} steps/s (64 episodes round robin)")
        for batched in (False, True):
            for n in flights_sessions:
                add(FLIGHTS, PATHS[batched], n,
                    lambda k, b=batched: bench_async(url, FLIGHTS, k, seconds, batched=b), server.pid)
    console.print("a token holder's steps under attack ...")
    attacked = under_attack(prefix, seconds, flood=220 if args.quick else 1100)
    console.print(f"[bold]speed after[/]: {speed_swings(prefix)}")
    report(rows, over, allowance, allowance_64)
    console.print(attack_table(attacked))
    return 0


def report(rows: list[Row], over: dict[str, dict[str, np.ndarray]], allowance: float,
           allowance_64: float) -> None:
    baseline = {r.sessions: r for r in rows if r.env == OPENENV and r.error is None}
    table = Table(title="Throughput and step latency (client and server in separate processes)")
    for col in ("env", "client · endpoint", "sessions", "steps/s", "p50 ms", "p99 ms", "x OpenEnv",
                "server CPU µs/step", "load avg"):
        table.add_column(col, justify="left" if col in ("env", "client · endpoint") else "right")
    for r in rows:
        if r.error is not None:
            table.add_row(r.env, r.path, str(r.sessions), f"[red]failed: {r.error}[/]", "", "", "", "", "")
            continue
        base = baseline.get(r.sessions)
        ratio = f"{r.rate / base.rate:.2f}x" if base else "n/a"
        cpu = f"{r.server_cpu_s / r.steps * 1e6:.0f}" if r.steps and np.isfinite(r.server_cpu_s) else ""
        table.add_row(r.env.removeprefix("agentrl/"), r.path, str(r.sessions), f"{r.rate:,.0f}",
                      f"{r.pct(50):.2f}", f"{r.pct(99):.2f}", ratio, cpu, r.load)
    console.print(table)

    t2 = Table(title="Per-step latency, one episode stepped back to back (µs); "
               "overhead = client - in-process")
    for col in ("env", "in-process p50", "RemoteEnv p50", "p99", "overhead p50",
                "AsyncEnvClient p50", "p99", "overhead p50"):
        t2.add_column(col, justify="right")
    for env_id, o in over.items():
        p = {k: (np.percentile(v, 50) * 1e6, np.percentile(v, 99) * 1e6) for k, v in o.items()}
        t2.add_row(env_id.removeprefix("agentrl/"), f"{p['local'][0]:.0f}",
                   f"{p['remote'][0]:.0f}", f"{p['remote'][1]:.0f}", f"{p['remote'][0] - p['local'][0]:.0f}",
                   f"{p['async'][0]:.0f}", f"{p['async'][1]:.0f}", f"{p['async'][0] - p['local'][0]:.0f}")
    console.print(t2)

    aims = Table(title="Aims (agentrl vs OpenEnv's echo, same run)")
    for col in ("aim", "client · endpoint", "measured", "met"):
        aims.add_column(col)
    ok = [r for r in rows if r.error is None]
    for n in (64, 512):
        for r in (r for r in ok if r.env == ECHO and r.path == PATHS[False] and r.sessions == n):
            if n in baseline:
                ratio = r.rate / baseline[n].rate
                aims.add_row(f"Echo >= 1.5x OpenEnv steps/s at {n} sessions", r.path, f"{ratio:.2f}x",
                             yes(ratio >= 1.5))
    for r in (r for r in ok if r.env == ECHO and r.sessions == 512 and r.path in PATHS.values()):
        aims.add_row("Echo p99 <= 50 ms at 512 sessions", r.path, f"{r.pct(99):.1f} ms",
                     yes(r.pct(99) <= 50))
    for env_id, o in over.items():
        for key, path in (("remote", REMOTE_PATH), ("async", PATHS[False])):
            d = (np.percentile(o[key], 50) - np.percentile(o["local"], 50)) * 1000
            aims.add_row(f"{env_id.removeprefix('agentrl/')} per-step overhead <= 0.5 ms median", path,
                         f"{d:.2f} ms", yes(d <= 0.5))
    if FLIGHTS in over:
        for r in (r for r in ok if r.env == FLIGHTS and r.path == PATHS[False] and r.sessions == 64):
            aims.add_row(f"Flights at 64 sessions >= 2,000 steps/s or >= 80% of in-process "
                         f"(on the server's core: {allowance:,.0f}/s one episode, "
                         f"{allowance_64:,.0f}/s 64 episodes)", r.path,
                         f"{r.rate:,.0f} steps/s = {r.rate / allowance:.0%} / {r.rate / allowance_64:.0%}",
                         yes(r.rate >= 2000 or r.rate >= 0.8 * allowance))
    console.print(aims)


if __name__ == "__main__":
    raise SystemExit(main())
