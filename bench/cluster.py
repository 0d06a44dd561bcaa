"""Benchmark of agentrl on more than one core: one server process against a cluster of two, in one run.

    .venv/bin/python bench/cluster.py            # full run (~10 minutes on a quiet two-core machine)
    .venv/bin/python bench/cluster.py --quick    # short run (~3 minutes), Echo-v0 at 16 episodes,
                                                 # 4 Bash-v0 episodes of 5 steps in the Bash-v0 row
    .venv/bin/python bench/cluster.py --kills-only   # the rows of a killed holder alone, (2) and (3)
    .venv/bin/python bench/cluster.py --memory-only  # the memory rows alone, (4)
    .venv/bin/python bench/cluster.py --throughput-only --no-ray   # the steps/s rows alone, (1)

Measures, through `AsyncEnvClient`s (one coroutine per episode awaiting `step`, as every framework
drives episodes; the clients share the machine's cores with the servers, as rollout workers on the
same machine would):
(1) steps/s of Echo-v0 and Flights-v0 at 64 and 512 live episodes on one `agentrl serve` process
(the baseline), on `agentrl serve --processes 2` and on `agentrl serve --ray --processes 2`, with
the ratios to the baseline; the episodes split over `--client-processes` client processes (2 by
default: one client's event loop tops out before two servers do on a light env), each with its
own client and event loop. Each row gives both sides' CPU over its window, read from /proc: each
server process's share of a core and the client processes' summed, so a row says which side bound
it; and the servers' steps per second of their own CPU, times the server processes: what they
would serve with the clients elsewhere, the figure that scales when clients and servers share the
cores; after the table, per env and size, the CPU a step cost each side and the ceiling that sets
on these cores (each process at most a core, all of them at most the cores), with what sets it;
(2) what a replay costs: Flights-v0 episodes of 10 steps whose holder is killed, in ms per replayed
step (the client's own count: replay time, less the new episodes' creates, over replayed steps) and
ms per new episode's create (a world's build); `bench/replay.py` times one replay alone;
(3) step latency in the second a holder is killed (SIGKILL) at 256 live Echo-v0 episodes, against
the p99 of the seconds before, and the episodes lost (the aim: 0);
(3b) what a replay costs for Bash-v0 (its sandboxes on a sandbox server on loopback): Bash-v0
episodes whose holder is SIGKILLed with steps in flight, half of them having read the clock (a step
no replay can repeat exactly); ms per replayed step and per new episode (its new sandbox), the
episodes replayed, those that raised `EpisodeLostError` (by reason) and those lost silently: an
episode that went on in a state not its own (its last step reads back its shell variable, working
directory, file and step count), or that failed otherwise (the aim: 0);
(4) memory per worker: what each holder holds warm and with 1,000 live Flights-v0 episodes split
over the holders (one process, then two), and what 1,000 episodes cost a holder, in a rollout's
shape (8 episodes a seed, the aim 0.5 MB an episode) and with a world per episode.
The sandbox server's own rows (execs/s with one and two processes) are `bench/sandbox_processes.py`.
Each row records the load average of the machine. Everything talks over loopback only; Ray runs as
a local cluster bound to 127.0.0.1. The Bash-v0 row needs a Docker engine and the sandbox image
(`bash docker/engine.sh`); `--no-bash` leaves it out.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import platform
import re
import signal
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from rich.console import Console
from rich.table import Table

from agentrl.client import AsyncEnvClient
from agentrl.client.cluster import EpisodeLostError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import client_processes  # bench/client_processes.py: clients in processes of their own, both sides' CPU
import sandbox_processes  # bench/sandbox_processes.py: a sandbox server on a free loopback port
from measuring import memory_kib, yes  # bench/measuring.py
from serving import (  # bench/serving.py: the servers and clusters started, their holders' processes
    ECHO,
    FLIGHTS,
    SERVER_PROCESSES,
    action,
    call,
    holder_pid,
    holders,
    served,
)

BASH = "agentrl/Bash-v0"


async def _drive_steps(url: str, env_id: str, first: int, episodes: int, seconds: float,
                       gate: client_processes.Gate) -> dict[str, Any]:
    """One client process: episodes `first` to `first + episodes - 1` (their seeds), each a coroutine
    stepping for `seconds` once every client's episodes are made (an episode that ends is closed and
    made again within the window); the steps and the seconds of its window."""
    client = AsyncEnvClient(url)
    made = list(await asyncio.gather(*(client.create_episode(env_id, seed=first + k)
                                       for k in range(episodes))))
    counts = [0] * episodes
    gate.opened()
    began = time.perf_counter()
    stop_at = began + seconds

    async def one(k: int) -> None:
        i = 0
        while time.perf_counter() < stop_at:
            result = await client.step(made[k].episode_id, action(env_id, i))
            counts[k] += 1
            i += 1
            if result.terminated or result.truncated:
                await client.close_episode(made[k].episode_id)
                made[k] = await client.create_episode(env_id, seed=first + k + 1000 * i)

    await asyncio.gather(*(one(k) for k in range(episodes)))
    elapsed = time.perf_counter() - began
    gate.closed()
    await asyncio.gather(*(client.close_episode(m.episode_id) for m in made))
    await client.aclose()
    return {"steps": sum(counts), "elapsed": elapsed}


@dataclass(frozen=True)
class Throughput:
    """Steps/s of a window driven from client processes, and the window (both sides' CPU over it)."""

    steps_s: float
    steps: int
    window: client_processes.Window

    @property
    def per_server_cpu_s(self) -> float:
        """Steps per second of the servers' own CPU: what scales with server processes on cores of
        their own, whatever share of the cores the clients took here."""
        return self.steps / max(sum(self.window.server_cpu_s), 1e-9)

    def ceiling(self, cores: int) -> tuple[float, str]:
        """The steps/s this window's CPU per step allows, and what sets it: each server process and
        each client process at most a core, all of them at most the machine's `cores`."""
        servers, clients = len(self.window.server_cpu_s), len(self.window.client_cpu_s)
        server_ms = sum(self.window.server_cpu_s) * 1e3 / max(self.steps, 1)
        client_ms = sum(self.window.client_cpu_s) * 1e3 / max(self.steps, 1)
        bounds = {"a core per server": servers * 1e3 / max(server_ms, 1e-9),
                  "a core per client": clients * 1e3 / max(client_ms, 1e-9),
                  f"{cores} cores shared": cores * 1e3 / max(server_ms + client_ms, 1e-9)}
        bound = min(bounds, key=bounds.__getitem__)
        return bounds[bound], f"{server_ms:.4f} + {client_ms:.4f} ms -> {bounds[bound]:,.0f}/s ({bound})"


def steps_per_s(url: str, env_id: str, episodes: int, seconds: float, clients: int) -> Throughput:
    """Steps/s of `episodes` episodes stepping for `seconds`, split over `clients` client processes."""
    pids = [holder_pid(h_url) for _, h_url in holders(url)]
    shares = [(url, env_id, first, n, seconds) for first, n in client_processes.split(episodes, clients)]
    window = client_processes.run(_drive_steps, shares, pids)
    return Throughput(sum(r["steps"] / r["elapsed"] for r in window.results),
                      sum(r["steps"] for r in window.results), window)


async def _kill_run(url: str, env_id: str, episodes: int, steps_before: int) -> dict[str, float]:
    """`episodes` live episodes step in rounds; after `steps_before` rounds a holder is SIGKILLed with
    steps in flight; latencies before and in the second after, replay cost, episodes lost."""
    client = AsyncEnvClient(url)
    latencies: list[tuple[float, float]] = []
    lost = 0
    kill_at = [0.0]
    rounds = steps_before * 2 + 4
    created, all_made = [0], asyncio.Event()

    async def one(k: int) -> None:
        nonlocal lost
        made = await client.create_episode(env_id, seed=k)
        created[0] += 1
        if created[0] == episodes:
            all_made.set()
        await all_made.wait()  # every episode live before the first step: the kill finds them all
        for i in range(rounds):
            began = time.perf_counter()
            try:
                result = await client.step(made.episode_id, action(env_id, i))
            except Exception:  # counted: the aim is that none is lost
                lost += 1
                return
            latencies.append((began, time.perf_counter() - began))
            if i == steps_before and k == 0:
                victim = made.episode_id.partition(".")[0]
                holder = next(h for h in client.cluster.router.map.values() if h.holder == victim)
                kill_at[0] = time.perf_counter()
                os.kill(holder_pid(holder.url), signal.SIGKILL)
            if result.terminated or result.truncated:
                await client.close_episode(made.episode_id)
                made = await client.create_episode(env_id, seed=k + 1000 * (i + 1))
        await client.close_episode(made.episode_id)

    await asyncio.gather(*(one(k) for k in range(episodes)))
    stats = client.cluster.stats
    await client.aclose()
    before = [d for t, d in latencies if t < kill_at[0]]
    during = [d for t, d in latencies if kill_at[0] <= t < kill_at[0] + 1.0]
    return {"p99_before_ms": float(np.percentile(before, 99)) * 1e3,
            "p99_kill_s_ms": float(np.percentile(during, 99)) * 1e3 if during else float("nan"),
            "max_kill_s_ms": max(during, default=float("nan")) * 1e3,
            **_replay_cost(stats), "lost": lost + stats.lost}


def _replay_cost(stats: Any) -> dict[str, Any]:
    """A client's `ReplayStats` as the kill rows give them: the creates apart from the steps."""
    return {"replayed_episodes": stats.episodes, "replayed_steps": stats.steps,
            "ms_per_replayed_step": (stats.seconds - stats.create_seconds) / max(stats.steps, 1) * 1e3,
            "create_ms": stats.create_seconds / max(stats.episodes, 1) * 1e3}


def bash_script(k: int, steps: int, clocked: bool) -> tuple[list[str], str]:
    """Episode `k`'s `steps` actions, and what its last one must print: the shell variable, working
    directory and file its first step set, and how many lines the steps between appended. Step 1
    reads the clock where `clocked` (its replay answers differently), else lists the directory."""
    first = f"cd /workspace && mkdir -p w && echo line{k} > w/f && export N=ep{k}"
    actions = [first, "date +%s%N" if clocked else "ls w"]
    actions += [f"echo {i} >> w/log && wc -l < w/log" for i in range(2, steps - 1)]
    actions.append('echo "$N:$(pwd):$(cat w/f):$(wc -l < w/log)"')
    return [call("execute_bash", command=a) for a in actions], f"ep{k}:/workspace:line{k}:{steps - 3}"


def lost_reason(reason: str) -> str:
    """`EpisodeLostError.reason` without what names one episode (the action of the step that differs)."""
    differs = re.match(r"replayed on another server, (.+?) of \S+ answered differently", reason)
    if differs:
        return re.sub(r" \(.*\)$", "", differs.group(1)) + " answered differently"
    return reason


async def _bash_kill_run(url: str, episodes: int, steps: int, kill_after: int) -> dict[str, Any]:
    """`episodes` Bash-v0 episodes of `steps` steps: all take their first two steps (setup, then the
    clock or not), then step on freely; after episode 0's step `kill_after` its holder is SIGKILLed
    with the others' steps in flight. On each holder every second episode reads the clock, so the
    killed holder has episodes of both kinds."""
    client = AsyncEnvClient(url)
    made = await asyncio.gather(*(client.create_episode(BASH, seed=k, options={"family": "count_files"})
                                  for k in range(episodes)))
    per_holder: dict[str, int] = collections.Counter()
    scripts = []
    for k, m in enumerate(made):
        holder = m.episode_id.partition(".")[0]
        scripts.append(bash_script(k, steps, clocked=per_holder[holder] % 2 == 1))
        per_holder[holder] += 1
    arrived, all_set_up = set(), asyncio.Event()

    def arrive(k: int) -> None:  # once per episode, set up or failed: no episode waits for a lost one
        arrived.add(k)
        if len(arrived) == episodes:
            all_set_up.set()

    reasons: dict[str, int] = collections.Counter()
    silent = 0

    async def one(k: int) -> None:
        nonlocal silent
        actions, want = scripts[k]
        eid = made[k].episode_id
        try:
            for i, act in enumerate(actions):
                result = await client.step(eid, act)
                if i == 1:  # every clock read before the kill: the replays must meet it
                    arrive(k)
                    await all_set_up.wait()
                if i == kill_after and k == 0:
                    victim = eid.partition(".")[0]
                    holder = next(h for h in client.cluster.router.map.values() if h.holder == victim)
                    os.kill(holder_pid(holder.url), signal.SIGKILL)
                if result.terminated or result.truncated:
                    raise RuntimeError(f"Bash-v0 episode {eid} ended at step {i + 1} of {steps}")
            if want not in result.observation:
                silent += 1  # it went on in a state not its own
            await client.close_episode(eid)
        except EpisodeLostError as exc:
            reasons[lost_reason(exc.reason)] += 1
        except Exception as exc:  # counted, and told: any other failure loses the episode as surely
            print(f"Bash-v0 episode {eid} failed: {exc!r}", flush=True)
            silent += 1
        finally:
            arrive(k)

    await asyncio.gather(*(one(k) for k in range(episodes)))
    stats = client.cluster.stats
    await client.aclose()
    if stats.lost != sum(reasons.values()):
        raise RuntimeError(f"the client counts {stats.lost} lost episodes, its callers saw {reasons}")
    return {**_replay_cost(stats), "episode_lost_error": sum(reasons.values()), "reasons": dict(reasons),
            "silent": silent}


def bash_kill_table(episodes: int, steps: int, kill_after: int) -> tuple[Table, int]:
    """The Bash-v0 kill row, on two env-server processes over one sandbox server; and its silent losses."""
    table = Table(title="Bash-v0 episodes whose holder is killed (SIGKILL), 2 processes, 1 sandbox server")
    for col in ("env", "live episodes", "steps each", "replayed episodes", "replayed steps",
                "ms per replayed step", "ms per create", "EpisodeLostError", "by reason", "lost silently",
                "load avg"):
        table.add_column(col, justify="right")
    with sandbox_processes.served(1, 2 * episodes + 8) as (sandbox_url, _pid):
        kwargs = json.dumps({"sandbox_url": sandbox_url, "command_timeout_s": 30})
        with served("processes", (BASH,), ("--env-kwargs", f"{BASH}={kwargs}")) as url:
            got = asyncio.run(_bash_kill_run(url, episodes, steps, kill_after))
    row = ["Bash-v0", str(episodes), str(steps), str(got["replayed_episodes"]), str(got["replayed_steps"]),
           f"{got['ms_per_replayed_step']:.1f}", f"{got['create_ms']:.0f}", str(got["episode_lost_error"]),
           "; ".join(f"{r}: {n}" for r, n in sorted(got["reasons"].items())) or "-",
           str(got["silent"]), f"{os.getloadavg()[0]:.1f}"]
    table.add_row(*row)
    print(" | ".join(row), flush=True)  # plain: one line a test can read, whatever the terminal's width
    return table, got["silent"]


async def holders_memory(url: str, episodes: int,
                  per_world: int) -> list[tuple[str, int, dict[str, int], dict[str, int]]]:
    """What each holder holds warm (one episode of a seed outside the run's made and closed on it:
    the env's modules and statements loaded, as in a server that has served) and with `episodes`
    live Flights-v0 episodes split over the holders, `per_world` episodes to a seed (a world and its
    task), created 64 at a time through one AsyncEnvClient: (holder, its episodes, warm KiB, loaded
    KiB), each as `measuring.memory_kib` reads them (RSS and held)."""
    listed = holders(url)
    for _name, h_url in listed:
        async with AsyncEnvClient(h_url) as warm:
            await warm.close_episode((await warm.create_episode(FLIGHTS, seed=10**6)).episode_id)
    warm_kib = {name: memory_kib(holder_pid(h_url)) for name, h_url in listed}
    client = AsyncEnvClient(url)
    gate = asyncio.Semaphore(64)

    async def make(k: int) -> str:
        async with gate:
            return (await client.create_episode(FLIGHTS, seed=k // per_world)).episode_id

    made = await asyncio.gather(*(make(k) for k in range(episodes)))
    rows = []
    for name, h_url in listed:
        live = httpx.get(f"{h_url}/health", timeout=10).json()["live_episodes"]
        rows.append((name, int(live), warm_kib[name], memory_kib(holder_pid(h_url))))
    for gates in range(0, len(made), 64):
        await asyncio.gather(*(client.close_episode(e) for e in made[gates:gates + 64]))
    await client.aclose()
    return rows


# a rollout's shape (GRPO: a group of samples per prompt, each an episode of the prompt's world),
# and the worst case, a world for every episode
MEMORY_SHAPES = {"a rollout: 8 episodes a seed": 8, "a seed each": 1}
MEMORY_AIM_MB = 0.5  # per live episode, in a rollout's shape


def memory_table(episodes: int) -> Table:
    """Memory per worker at `episodes` live Flights-v0 episodes, on one process and on two, in a
    rollout's shape and with a world per episode."""
    table = Table(title=f"memory per worker at {episodes:,} live Flights-v0 episodes (held: anonymous "
                        "memory and the worlds' page files once; RSS: a shared page once per mapping)")
    for col in ("episodes", "server", "holder", "its episodes", "warm MB", "held MB", "RSS MB",
                "held MB per 1,000 episodes", "RSS MB per 1,000", "aim", "load avg"):
        table.add_column(col, justify="right")
    for shape, per_world in MEMORY_SHAPES.items():
        for kind in ("single", "processes"):
            with served(kind, (FLIGHTS,)) as url:
                for name, live, warm, loaded in asyncio.run(holders_memory(url, episodes, per_world)):
                    held_k, rss_k = ((loaded[k] - warm[k]) / max(live, 1) * 1000 / 1024
                                     for k in ("held", "rss"))
                    aim = yes(held_k <= MEMORY_AIM_MB * 1000) if per_world > 1 else "-"
                    row = [shape, "1 process" if kind == "single" else "2 processes", name, f"{live:,}",
                           f"{warm['rss'] / 1024:.0f}", f"{loaded['held'] / 1024:.0f}",
                           f"{loaded['rss'] / 1024:.0f}",
                           f"{held_k:.0f}", f"{rss_k:.0f}", aim, f"{os.getloadavg()[0]:.1f}"]
                    table.add_row(*row)
                    print(" | ".join(row), flush=True)  # plain: one line whatever the terminal's width
    return table


KIND_NAMES = {"single": "1 process", "processes": "2 processes", "ray": "2 Ray actors"}


def throughput_row(env_id: str, episodes: int, kind: str, clients: int, got: Throughput,
                   baseline: Throughput) -> list[str]:
    """A steps/s row: the figure, both sides' CPU over its window, and the servers' steps per second of
    their own CPU, with what they would serve on cores of their own (clients elsewhere)."""
    servers = len(got.window.server_cpu_s)
    bound, bound_one = servers * got.per_server_cpu_s, baseline.per_server_cpu_s
    return [env_id.split("/")[1], str(episodes), KIND_NAMES[kind], str(clients), f"{got.steps_s:,.0f}",
            f"{got.steps_s / baseline.steps_s:.2f}", *got.window.busy_cells(), f"{got.per_server_cpu_s:,.0f}",
            f"{bound:,.0f}", f"{bound / bound_one:.2f}", f"{os.getloadavg()[0]:.1f}"]


def throughput_tables(console: Console, ray: bool, envs: tuple[str, ...], sizes: tuple[int, ...],
                      seconds: float, clients: int) -> None:
    """Steps/s on one process, two and two Ray actors, each driven from `clients` client processes."""
    kinds = ["single", "processes"] + (["ray"] if ray else [])
    table = Table(title=f"steps/s from {clients} client process{'es' if clients > 1 else ''} "
                        "(one AsyncEnvClient each), "
                        f"{os.cpu_count()} cores shared by servers and clients")
    for col in ("env", "episodes", "servers", "client processes", "steps/s", "x vs 1",
                "servers' CPU (of a core each)", "clients' CPU (of a core, summed)", "steps per server CPU-s",
                "steps/s, clients elsewhere", "x vs 1", "load avg"):
        table.add_column(col, justify="right")
    notes: list[str] = []
    with ExitStack() as stack:  # all up at once: each row measures every kind back to back
        urls = {kind: stack.enter_context(served(kind, (ECHO, FLIGHTS))) for kind in kinds}
        for env_id, n in sorted(((e, n) for e in envs for n in sizes), key=lambda r: (r[1], r[0] == ECHO)):
            got = {kind: steps_per_s(urls[kind], env_id, n, seconds, clients) for kind in kinds}
            for kind in kinds:
                row = throughput_row(env_id, n, kind, clients, got[kind], got["single"])
                table.add_row(*row)
                print(" | ".join(row), flush=True)  # plain: one line a test can read
            ceilings = {kind: got[kind].ceiling(len(os.sched_getaffinity(0))) for kind in kinds}
            notes.append(f"{env_id.split('/')[1]} at {n}: " + "; ".join(
                f"{KIND_NAMES[kind]} {text}, {ceilings[kind][0] / ceilings['single'][0]:.2f}x"
                for kind, (_, text) in ceilings.items()))
    console.print(table)
    console.print("CPU a step, servers + clients, and the ceiling it sets on these cores:")
    for note in notes:
        print(note, flush=True)
    console.print("steps/s, clients elsewhere: the servers' steps per second of their own CPU times the "
                  "server processes (each on a core of its own); x vs 1 there is how the servers scale.")


def kill_tables(console: Console, quick: bool, bash: bool) -> int:
    """The rows of a holder killed with steps in flight (Echo-v0, Flights-v0, then Bash-v0); exit status."""
    kill_env, kill_n = (ECHO, 32) if quick else (ECHO, 256)
    replay_env, replay_n = (FLIGHTS, 8) if quick else (FLIGHTS, 64)
    kill_table = Table(title="a holder killed (SIGKILL) with steps in flight, 2 processes")
    for col in ("env", "live episodes", "p99 before (ms)", "p99 in the kill's second (ms)", "max (ms)",
                "replayed episodes", "replayed steps", "ms per replayed step", "ms per create",
                "episodes lost", "load avg"):
        kill_table.add_column(col, justify="right")
    for env_id, n, before in ((kill_env, kill_n, 4), (replay_env, replay_n, 10)):
        with served("processes", (ECHO, FLIGHTS)) as url:
            got = asyncio.run(_kill_run(url, env_id, n, before))
        kill_table.add_row(env_id.split("/")[1], str(n), f"{got['p99_before_ms']:.1f}",
                           f"{got['p99_kill_s_ms']:.1f}", f"{got['max_kill_s_ms']:.1f}",
                           str(got["replayed_episodes"]), str(got["replayed_steps"]),
                           f"{got['ms_per_replayed_step']:.2f}", f"{got['create_ms']:.0f}", str(got["lost"]),
                           f"{os.getloadavg()[0]:.1f}")
        if got["lost"]:
            console.print(kill_table)
            console.print(f"[red]{got['lost']} episodes lost[/red]")
            return 1
    console.print(kill_table)

    if bash:
        bash_table, silent = bash_kill_table(*((4, 5, 2) if quick else (32, 10, 4)))
        console.print(bash_table)
        if silent:
            console.print(f"[red]{silent} Bash-v0 episodes lost silently[/red]")
            return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Echo-v0 at 16 episodes, short windows")
    parser.add_argument("--seconds", type=float, default=None, help="measuring window per row")
    parser.add_argument("--no-ray", dest="ray", action="store_false", help="skip the Ray rows")
    parser.add_argument("--client-processes", type=int, default=SERVER_PROCESSES, metavar="K",
                        help="client processes driving each steps/s row (default: as many as the most "
                             "server processes in a row, the same for every column, so that no server "
                             "waits on a client loop that another server's steps keep busy)")
    parser.add_argument("--no-bash", dest="bash", action="store_false",
                        help="skip the Bash-v0 kill row (it needs a Docker engine and the sandbox image)")
    parser.add_argument("--kills-only", action="store_true",
                        help="only the rows of a killed holder (replays), not steps/s or memory")
    parser.add_argument("--memory-only", action="store_true", help="only the memory rows (4)")
    parser.add_argument("--throughput-only", action="store_true", help="only the steps/s rows (1)")
    parser.add_argument("--env", action="append", choices=("Echo-v0", "Flights-v0"),
                        help="the env of the steps/s rows (repeat for more; default both, --quick Echo-v0)")
    parser.add_argument("--episodes", type=int, action="append",
                        help="live episodes of a steps/s row (repeat for more; default 64 and 512, "
                             "--quick 16)")
    args = parser.parse_args()
    seconds = args.seconds or (2.0 if args.quick else 10.0)
    envs = tuple(f"agentrl/{e}" for e in args.env) if args.env else (ECHO,) if args.quick else (ECHO, FLIGHTS)
    sizes = tuple(args.episodes) if args.episodes else (16,) if args.quick else (64, 512)
    console = Console()
    console.print(f"machine: {platform.machine()}, {os.cpu_count()} cores, "
                  f"Python {platform.python_version()}; load average at start {os.getloadavg()[0]:.1f}")

    if args.memory_only:
        console.print(memory_table(100 if args.quick else 1000))
        return 0
    if not args.kills_only:
        throughput_tables(console, args.ray, envs, sizes, seconds, args.client_processes)
        if args.throughput_only:
            return 0
        console.print(memory_table(100 if args.quick else 1000))
    return kill_tables(console, args.quick, args.bash)


if __name__ == "__main__":
    raise SystemExit(main())
