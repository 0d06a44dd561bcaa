"""Benchmark of whole episodes on `agentrl serve` against OpenEnv's own server and client, in one run.

    .venv/bin/python bench/episodes.py            # full run (~4 minutes on a quiet machine)
    .venv/bin/python bench/episodes.py --quick    # short run (~1 minute), 64 episodes, k = 2 and 8

N coroutines each run episodes of k steps back to back, as a trainer's rollout workers do with
short episodes: through the public `AsyncEnvClient`, create, k steps, close (every call over
`/v1/ws`); through the same client, reset the one episode each coroutine holds, then k steps (the
episode a `RemoteEnv` or a trainer reuses); and, as the baseline, the echo env generated from
OpenEnv's template on OpenEnv's `create_app`, driven by OpenEnv's async client as its sessions are
meant to be used: WebSocket connect, reset, k steps, close. Echo-v0 and Flights-v0 at k = 2, 4, 8
and 64 and 512 concurrent episodes (OpenEnv has no Flights-v0: its rows are Echo only); episodes/s,
steps/s and the p99 of every kind of call, and, in the same run, the step-only rate of episodes
that never end (the rate these rows aim at: an episode's life should cost little beside its steps).
Seeds cycle over `SEEDS` tasks, as a trainer repeating its task set does, so that Flights-v0's
worlds come from its world cache (building a new world takes it 0.2 to 0.5 s, which no serving
path changes).

The server setup is `bench/server.py`'s (`bench/serving.py`, `bench/measuring.py`): servers pinned
to the first core, clients to the others, the load average and the server's CPU per episode recorded
with each row; loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measuring  # bench/measuring.py: the machine, its load, the pinning, a process's CPU
import server as base  # bench/server.py: the step-only row and the server whose CPU it reads
import serving  # bench/serving.py: the servers, the OpenEnv template, the actions
from rich.console import Console

from agentrl.client import AsyncEnvClient
from agentrl.server import collector
from agentrl.server.local import free_port

ECHO, FLIGHTS, OPENENV = serving.ECHO, serving.FLIGHTS, serving.OPENENV
CREATE_PATH = "AsyncEnvClient · create, k steps, close"
RESET_PATH = "AsyncEnvClient · reset, k steps"
OPENENV_PATH = "OpenEnv client · connect, reset, k steps, close"
OPENENV_HELD_PATH = "OpenEnv client · reset, k steps (connection held)"
STEP_ONLY_PATH = "AsyncEnvClient · steps only (never ends)"
SEEDS = 64  # episodes cycle over this many tasks: Flights-v0's worlds then come from its world cache
console = Console(width=190)


@dataclass
class Row:
    env: str
    path: str
    sessions: int
    k: int
    episodes: int = 0
    steps: int = 0
    seconds: float = 1.0
    latencies: dict[str, list[float]] = field(default_factory=dict)  # by kind of call
    server_cpu_s: float = float("nan")
    load: str = ""
    error: str | None = None

    def p99(self, kind: str) -> float | None:
        values = self.latencies.get(kind)
        return float(np.percentile(values, 99) * 1000) if values else None

    def p99_all(self) -> float:
        every = np.concatenate([np.asarray(v) for v in self.latencies.values()])
        return float(np.percentile(every, 99) * 1000)


class Timed:
    """Latencies of the calls of one coroutine, by kind."""

    def __init__(self, row: Row) -> None:
        self.row = row

    async def __call__(self, kind: str, call: Awaitable[Any]) -> Any:
        started = time.perf_counter()
        out = await call
        self.row.latencies.setdefault(kind, []).append(time.perf_counter() - started)
        return out


async def run_episodes(row: Row, seconds: float, episode: Callable[[int, Timed], Awaitable[None]]) -> None:
    """`row.sessions` coroutines run `episode` back to back until the deadline (each finishes the
    one it is in); a warm-up first, so that connections, caches and the server's cost estimates
    of each kind of call are there before the measurement."""
    async def spin(until: float, into: Row, i: int) -> None:
        timed = Timed(into)
        while time.perf_counter() < until:
            await episode(i, timed)
            into.episodes += 1

    warm = Row(row.env, row.path, row.sessions, row.k)
    await asyncio.gather(*(spin(time.perf_counter() + min(0.5, seconds / 3), warm, i)
                           for i in range(row.sessions)))
    cpu = measuring.server_cpu_s(base._SERVER_PID)
    started = time.perf_counter()
    await asyncio.gather(*(spin(started + seconds, row, i) for i in range(row.sessions)))
    row.seconds = time.perf_counter() - started
    row.server_cpu_s = measuring.server_cpu_s(base._SERVER_PID) - cpu
    row.steps = row.episodes * row.k


async def agentrl_row(url: str, env_id: str, n: int, k: int, seconds: float, reuse: bool) -> Row:
    row = Row(env_id, RESET_PATH if reuse else CREATE_PATH, n, k)
    async with AsyncEnvClient(url, timeout=120) as client:
        held: dict[int, tuple[str, str]] = {}
        seeds = iter(range(10**9))

        async def create_and_close(i: int, timed: Timed) -> None:
            created = await timed("create", client.create_episode(env_id, seed=next(seeds) % SEEDS))
            act = serving.action_for(env_id, created.info)
            for _ in range(k):
                await timed("step", client.step(created.episode_id, act))
            await timed("close", client.close_episode(created.episode_id))

        async def reset_and_reuse(i: int, timed: Timed) -> None:
            if i not in held:
                created = await client.create_episode(env_id, seed=i)
                held[i] = (created.episode_id, serving.action_for(env_id, created.info))
            eid, _ = held[i]
            first = await timed("reset", client.reset_episode(eid, seed=next(seeds) % SEEDS))
            act = serving.action_for(env_id, first.info)
            for _ in range(k):
                await timed("step", client.step(eid, act))

        await run_episodes(row, seconds, reset_and_reuse if reuse else create_and_close)
        await asyncio.gather(*(client.close_episode(eid) for eid, _ in held.values()))
    return row


async def step_only_row(url: str, env_id: str, n: int, seconds: float) -> Row:
    """The same client stepping `n` episodes that never end (`bench/server.py`'s row)."""
    measured = await base.bench_async(url, env_id, n, seconds, batched=False)
    return Row(env_id, STEP_ONLY_PATH, n, 0, 0, measured.steps, measured.seconds,
               {"step": list(measured.latencies)}, measured.server_cpu_s)


async def openenv_row(url: str, n: int, k: int, seconds: float, held: bool) -> Row:
    """OpenEnv's client on OpenEnv's server: a connection (one session) per episode, or, `held`, one
    per coroutine for all its episodes (a reset starts the next; the faster of the two here)."""
    from bench_echo.client import BenchEchoEnv
    from bench_echo.models import BenchEchoAction

    row = Row(OPENENV, OPENENV_HELD_PATH if held else OPENENV_PATH, n, k)
    action = BenchEchoAction(message="hello")
    clients: dict[int, Any] = {}

    def client_for(i: int) -> Any:
        return BenchEchoEnv(base_url=url, connect_timeout_s=60, message_timeout_s=60)

    async def episode(i: int, timed: Timed) -> None:
        if not held:
            client = client_for(i)
            await timed("connect", client.connect())
        elif (client := clients.get(i)) is None:
            client = clients[i] = client_for(i)
            await client.connect()
        await timed("reset", client.reset())
        for _ in range(k):
            await timed("step", client.step(action))
        if not held:
            await timed("close", client.close())

    try:
        await run_episodes(row, seconds, episode)
    finally:
        await asyncio.gather(*(c.close() for c in clients.values()), return_exceptions=True)
    return row


def measure(args: argparse.Namespace) -> list[Row]:
    try:
        import uvloop  # the clients get the same fast loop as both servers

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    seconds = 1.5 if args.quick else 4.0
    prefix, pinning = measuring.pin_cores(not args.no_pin)
    console.print(f"[bold]machine[/]: {measuring.machine()}; {pinning}")
    console.print(f"[bold]speed before[/]: {measuring.speed_swings(prefix)}")
    rows: list[Row] = []

    def add(label: str, server_pid: int, make: Callable[[], Awaitable[Row]]) -> None:
        console.print(f"{label} ...")
        base._SERVER_PID = server_pid
        try:
            row = run(make())
        except Exception as exc:  # one failing configuration must not lose the others' figures
            console.print(f"  [red]failed[/]: {type(exc).__name__}: {exc}")
            rows.append(Row("?", label, 0, 0, error=f"{type(exc).__name__}: {exc}"[:80]))
            return
        row.load = measuring.load()
        console.print(f"  {row.episodes / row.seconds:,.0f} episodes/s, {row.steps / row.seconds:,.0f} "
                      f"steps/s, p99 {row.p99_all():.1f} ms (load {row.load})")
        rows.append(row)

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp, serving.agentrl_server(port, prefix) as server:
        workdir = serving.openenv_template(Path(tmp))
        sys.path.insert(0, str(workdir))
        for n in args.sessions:
            add(f"{ECHO} steps only, {n} episodes", server.pid,
                lambda n=n: step_only_row(url, ECHO, n, seconds))
            for k in args.k:
                for reuse in (False, True):
                    add(f"{ECHO} {'reset' if reuse else 'create'}, {k} steps, {n} episodes", server.pid,
                        lambda n=n, k=k, r=reuse: agentrl_row(url, ECHO, n, k, seconds, r))
                # a fresh OpenEnv server per row: a used one stalls new handshakes
                for held in (True, False) if args.openenv_connect else (True,):
                    oport = free_port()
                    with serving.openenv_server(workdir, oport, prefix) as baseline:
                        add(f"{OPENENV}, {k} steps, {n} episodes{'' if held else ', a connection each'}",
                            baseline.pid, lambda n=n, k=k, p=oport, h=held: openenv_row(
                                f"http://127.0.0.1:{p}", n, k, seconds, h))
        for n in args.flights_sessions:
            add(f"{FLIGHTS} steps only, {n} episodes", server.pid,
                lambda n=n: step_only_row(url, FLIGHTS, n, seconds))
            for k in args.k:
                add(f"{FLIGHTS} create, {k} steps, {n} episodes", server.pid,
                    lambda n=n, k=k: agentrl_row(url, FLIGHTS, n, k, seconds, False))
    console.print(f"[bold]speed after[/]: {measuring.speed_swings(prefix)}")
    return rows


def report(rows: list[Row]) -> None:
    ok = [r for r in rows if r.error is None]
    step_only = {(r.env, r.sessions): r.steps / r.seconds for r in ok if r.path == STEP_ONLY_PATH}
    openenv: dict[tuple[int, int], float] = {}  # OpenEnv's faster way, per size
    for r in ok:
        if r.env == OPENENV:
            key = (r.sessions, r.k)
            openenv[key] = max(openenv.get(key, 0.0), r.episodes / r.seconds)
    table = Table(title="Whole episodes: N coroutines, each running episodes of k steps back to back")
    for col in ("env", "client · episode", "N", "k", "episodes/s", "steps/s", "% of steps only",
                "x OpenEnv", "p99 start ms", "p99 step ms", "p99 close ms", "p99 all ms",
                "server CPU µs/episode", "load avg"):
        table.add_column(col, justify="left" if col in ("env", "client · episode") else "right")
    for r in rows:
        if r.error is not None:
            table.add_row(r.env, r.path, "", "", f"[red]failed: {r.error}[/]", *[""] * 9)
            continue
        rate, episodes = r.steps / r.seconds, r.episodes / r.seconds
        only = step_only.get((r.env, r.sessions))
        share = f"{rate / only:.0%}" if only and r.path != STEP_ONLY_PATH else ""
        vs = openenv.get((r.sessions, r.k))
        ratio = f"{episodes / vs:.2f}x" if vs and r.env == ECHO and r.k else ""  # OpenEnv serves only echo
        start = r.p99("create") or r.p99("reset")
        measured_cpu = r.episodes and np.isfinite(r.server_cpu_s)
        cpu = f"{r.server_cpu_s / r.episodes * 1e6:,.0f}" if measured_cpu else ""
        table.add_row(r.env.removeprefix("agentrl/"), r.path, str(r.sessions), str(r.k or ""),
                      f"{episodes:,.0f}" if r.k else "", f"{rate:,.0f}", share, ratio, _ms(start),
                      _ms(r.p99("step")), _ms(r.p99("close")), f"{r.p99_all():.1f}", cpu, r.load)
    console.print(table)

    aims = Table(title="Aims (same run)")
    for col in ("aim", "client · episode", "measured", "met"):
        aims.add_column(col)
    for r in ok:
        if r.env == ECHO and r.path == CREATE_PATH and r.k == 8 and r.sessions == 512:
            only = step_only.get((ECHO, 512))
            if only:
                aims.add_row("Echo k=8, 512 episodes: steps/s >= 80% of steps only", r.path,
                             f"{r.steps / r.seconds / only:.0%}",
                             measuring.yes(r.steps / r.seconds >= 0.8 * only))
            aims.add_row("Echo k=8, 512 episodes: p99 of every call <= 100 ms", r.path,
                         f"{r.p99_all():.1f} ms", measuring.yes(r.p99_all() <= 100))
        if r.env == ECHO and r.path == CREATE_PATH and (r.sessions, r.k) in openenv:
            ratio = r.episodes / r.seconds / openenv[(r.sessions, r.k)]
            aims.add_row(f"Echo k={r.k}, {r.sessions} episodes: >= 2x OpenEnv's episodes/s", r.path,
                         f"{ratio:.2f}x", measuring.yes(ratio >= 2))
    console.print(aims)


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short measurements (~1 minute in all)")
    parser.add_argument("--sessions", type=int, nargs="+", default=None, help="default: 64 512 (quick: 64)")
    parser.add_argument("--flights-sessions", type=int, nargs="*", default=None,
                        help="default: 64 512 (quick: 64); none given: no Flights-v0 rows")
    parser.add_argument("--k", type=int, nargs="+", default=None, help="steps per episode (default: 2 4 8)")
    parser.add_argument("--openenv-connect", action="store_true",
                        help="also run OpenEnv with a connection per episode (its server stalled new "
                             "handshakes under that churn here: the row may fail after its timeouts)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin servers and clients to cores")
    args = parser.parse_args()
    args.sessions = args.sessions or ([64] if args.quick else [64, 512])
    if args.flights_sessions is None:
        args.flights_sessions = [64] if args.quick else [64, 512]
    args.k = args.k or ([2, 8] if args.quick else [2, 4, 8])
    # the client process collects garbage as the server does (see bench/server.py)
    with collector.short_pauses():
        report(measure(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
