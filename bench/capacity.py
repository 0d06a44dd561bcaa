"""A capacity model of agentrl's env servers: per-core figures measured here, projected to 1,000 nodes.

    .venv/bin/python bench/capacity.py            # full (~4 minutes on a quiet two-core machine)
    .venv/bin/python bench/capacity.py --quick    # ~60 s: shorter windows, fewer episodes (CI)
    .venv/bin/python bench/capacity.py --plot docs/images/capacity.png

Measures, on this machine, through one `AsyncEnvClient` in this process:
(1) for Echo-v0 and Flights-v0, on one `agentrl serve` process: steps/s with `--episodes` episodes
stepping, each of `--steps` steps (then closed and made again, as a rollout's are: a create's cost is
in the figure), and the CPU each step costs the server and the client (ms per step, from /proc);
(2) ms per create (one at a time), and what a replay costs (`bench/replay.py`: a holder of two
SIGKILLed, the create and the ms per replayed step); (3) MB a live Flights-v0 episode holds, in a
rollout's shape (8 episodes a seed; `bench/cluster.py`'s reading).

The model: a server process runs on one core, so it serves at most 1,000 / (server ms per step)
steps/s, and a machine whose clients run on it too at most cores x 1,000 / (server + client ms per
step). It is checked where it can be here, against one process and against `agentrl serve --processes
2` measured in the same run (the ratio measured / projected; the aim: within 20%). A node of
`--node-cores` cores serving only (its rollout workers elsewhere) then serves cores x 1,000 / (server
ms per step), and a rollout of `--prompts` x `--samples` episodes of `--steps` steps a minute needs
the nodes whose steps/s and memory hold it. The projection to 1,000 nodes prints, per size, what
breaks the model first: the holder map each client reads (its bytes, every `REFRESH_S`), the replay
storm after a node is lost (the lost node's episodes re-created and replayed on the others' cores),
and the connections (every client keeps one to every holder it has episodes on). Figures depend on
the machine and on what else runs on it: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from agentrl.client import AsyncEnvClient
from agentrl.client.cluster import REFRESH_S

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay as replay_bench  # bench/replay.py: one replay at a time
from cluster import holders_memory  # bench/cluster.py: what each holder holds
from measuring import server_cpu_s  # bench/measuring.py
from processes import answers  # bench/processes.py: whether a server or a cluster is up
from serving import ECHO, FLIGHTS, action, holder_pid, holders, served  # bench/serving.py

ENVS = (ECHO, FLIGHTS)
AIM_RATIO = 0.2  # the projection for 1 and 2 processes within 20% of the measured figure
NODES = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


@dataclass(frozen=True)
class Rate:
    """Steps/s of a window, and the CPU each step cost the servers and the client (ms)."""

    steps_s: float
    server_ms: float
    client_ms: float

    def projected(self, processes: int, cores: int) -> float:
        """Steps/s of `processes` server processes on `cores` cores that their client shares."""
        return min(processes * 1000 / self.server_ms, cores * 1000 / (self.server_ms + self.client_ms))


async def measure_rate(url: str, env_id: str, episodes: int, steps: int, seconds: float,
                       per_seed: int = 8) -> Rate:
    """`episodes` coroutines stepping episodes of `steps` steps for `seconds` (an episode that ends
    is closed and made again, `per_seed` episodes to a seed, as a rollout's groups make them); the
    servers' and this process's CPU over the window."""
    pids = [holder_pid(h_url) for _, h_url in holders(url)]
    client = AsyncEnvClient(url)
    seeds = itertools.count()
    made = await asyncio.gather(*(client.create_episode(env_id, seed=next(seeds) // per_seed)
                                  for _ in range(episodes)))
    count, stop_at = [0], time.perf_counter() + seconds

    async def one(episode_id: str) -> None:
        i = 0
        while time.perf_counter() < stop_at:
            result = await client.step(episode_id, action(env_id, i))
            count[0] += 1
            i += 1
            if result.terminated or result.truncated or i == steps:
                await client.close_episode(episode_id)
                made_again = await client.create_episode(env_id, seed=next(seeds) // per_seed)
                episode_id, i = made_again.episode_id, 0
        await client.close_episode(episode_id)

    server0, own0, began = sum(map(server_cpu_s, pids)), time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(m.episode_id) for m in made))
    elapsed = time.perf_counter() - began
    server_s, own_s = sum(map(server_cpu_s, pids)) - server0, time.process_time() - own0
    await client.aclose()
    steps_done = max(count[0], 1)
    return Rate(count[0] / elapsed, server_s / steps_done * 1000, own_s / steps_done * 1000)


async def create_ms(url: str, env_id: str, creates: int) -> float:
    """Median ms of a create, one at a time (a new seed each: a Flights-v0 world built each time)."""
    took = []
    async with AsyncEnvClient(url) as client:
        for k in range(creates):
            began = time.perf_counter()
            made = await client.create_episode(env_id, seed=5000 + k)
            took.append((time.perf_counter() - began) * 1000)
            await client.close_episode(made.episode_id)
    return sorted(took)[len(took) // 2]


@dataclass(frozen=True)
class Rollout:
    prompts: int
    samples: int
    steps: int

    @property
    def episodes(self) -> int:
        return self.prompts * self.samples

    @property
    def steps_s(self) -> float:  # all of it within a minute
        return self.episodes * self.steps / 60


@dataclass(frozen=True)
class Node:
    cores: int
    memory_mb: float


def projection(per_env: dict[str, dict[str, float]], rollout: Rollout, node: Node, map_entry_bytes: int,
               clients: int) -> list[dict[str, float]]:
    """Per cluster size: steps/s served, the rollout's share of it, and what strains the model."""
    flights = per_env[FLIGHTS]
    node_steps_s = node.cores * 1000 / flights["server_ms"]
    rows = []
    for n in NODES:
        holders = n * node.cores
        lost_episodes = rollout.episodes / n  # a node's share, replayed on the others at once
        replay_ms = flights["create_ms"] + rollout.steps / 2 * flights["replayed_step_ms"]  # half-way through
        replay_cpu_s = lost_episodes * replay_ms / 1000
        rows.append({
            "nodes": n, "steps_s": n * node_steps_s, "need_steps_s": rollout.steps_s,
            "memory_share": rollout.episodes * flights["mb_per_episode"] / (n * node.memory_mb),
            "map_kb": holders * map_entry_bytes / 1000,
            "map_kb_s": clients * holders * map_entry_bytes / 1000 / REFRESH_S,
            "replay_stall_s": replay_cpu_s / ((n - 1) * node.cores) if n > 1 else math.inf,
            "connections_per_holder": clients, "connections": clients * holders,
        })
    return rows


def nodes_needed(per_env: dict[str, dict[str, float]], rollout: Rollout, node: Node) -> int:
    flights = per_env[FLIGHTS]
    by_steps = rollout.steps_s * flights["server_ms"] / 1000 / node.cores
    by_memory = rollout.episodes * flights["mb_per_episode"] / node.memory_mb
    return max(1, math.ceil(max(by_steps, by_memory)))


def plot(rows: list[dict[str, float]], rollout: Rollout, needed: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nodes = [r["nodes"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    left.loglog(nodes, [r["steps_s"] for r in rows], "o-", label="Flights-v0 steps/s served (projected)")
    left.axhline(rollout.steps_s, color="C3", ls="--",
                 label=f"{rollout.prompts} prompts x {rollout.samples} x {rollout.steps} steps a minute")
    left.axvline(needed, color="C2", ls=":", label=f"nodes needed: {needed}")
    left.set(xlabel="nodes", ylabel="steps/s", title="throughput")
    left.legend(fontsize=8)
    stall = [(r["nodes"], r["replay_stall_s"]) for r in rows if math.isfinite(r["replay_stall_s"])]
    right.loglog([n for n, _ in stall], [s for _, s in stall], "o-",
                 label="replay after a node loss (s of CPU per core)")
    right.loglog(nodes, [r["map_kb"] / 1000 for r in rows], "s-", label="holder map (MB per read)")
    right.set(xlabel="nodes", title="where the model strains")
    right.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"plot written to {path}")


def measure(args: argparse.Namespace) -> tuple[dict[str, dict[str, float]], dict[str, Rate], int]:
    """Every figure of the model (per env), the 2-process rates, and a map entry's bytes."""
    per_env: dict[str, dict[str, float]] = {}
    with served("single", ENVS) as url:
        for env_id in ENVS:
            rate = asyncio.run(measure_rate(url, env_id, args.episodes, args.steps, args.seconds))
            per_env[env_id] = {"steps_s": rate.steps_s, "server_ms": rate.server_ms,
                               "client_ms": rate.client_ms,
                               "create_ms": asyncio.run(create_ms(url, env_id, args.creates))}
        rows = asyncio.run(holders_memory(url, args.memory_episodes, 8))
        (_, live, warm, loaded), = rows
        per_env[FLIGHTS]["mb_per_episode"] = (loaded["held"] - warm["held"]) / max(live, 1) / 1024
    two: dict[str, Rate] = {}
    with served("processes", ENVS) as url:
        for env_id in ENVS:
            two[env_id] = asyncio.run(measure_rate(url, env_id, args.episodes, args.steps, args.seconds))
        entry_bytes = len(httpx.get(url, timeout=10).content) // 2
        for env_id in ENVS:
            replayed = asyncio.run(replay_bench.replay_alone(url, env_id, args.replays, 6))
            per_env[env_id]["replayed_step_ms"] = replayed["replayed_step_ms"]
            per_env[env_id]["replay_create_ms"] = replayed["create_ms"]
            _wait_up(url)  # the killed holder, restarted by its supervisor
    return per_env, two, entry_bytes


def _wait_up(url: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not answers(url):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the cluster at {url} did not come back in {timeout_s} s")
        time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter windows and fewer episodes (~60 s)")
    parser.add_argument("--prompts", type=int, default=512)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10, help="steps per episode, measured and projected")
    parser.add_argument("--node-cores", type=int, default=16, help="cores of a node serving episodes")
    parser.add_argument("--node-memory-gb", type=float, default=32.0, help="memory a node gives its servers")
    parser.add_argument("--clients", type=int, default=64, help="rollout workers, each one cluster client")
    parser.add_argument("--plot", type=Path, help="write the projection's plot here (PNG)")
    args = parser.parse_args()
    args.episodes, args.seconds = (32, 2.0) if args.quick else (64, 8.0)
    args.creates, args.replays, args.memory_episodes = (8, 4, 100) if args.quick else (40, 12, 1000)
    console = Console(width=170)
    cores = len(os.sched_getaffinity(0))
    console.print(f"{cores} cores; load average at start {os.getloadavg()[0]:.2f}")
    per_env, two, entry_bytes = measure(args)

    table = Table(title=f"per core, one server process, episodes of {args.steps} steps")
    for col in ("env", "steps/s", "server ms/step", "client ms/step", "create ms", "replay: create ms",
                "ms per replayed step", "MB per live episode"):
        table.add_column(col, justify="right")
    for env_id, f in per_env.items():
        mb = f"{f['mb_per_episode']:.2f}" if "mb_per_episode" in f else "-"
        table.add_row(env_id, f"{f['steps_s']:,.0f}", f"{f['server_ms']:.3f}", f"{f['client_ms']:.3f}",
                      f"{f['create_ms']:.1f}", f"{f['replay_create_ms']:.1f}", f"{f['replayed_step_ms']:.3f}",
                      mb)
    console.print(table)

    check = Table(title=f"the model against measured figures on this machine ({cores} cores, client here)")
    for col in ("env", "processes", "measured steps/s", "projected steps/s", "measured / projected",
                "within 20%", "a server's share of a core"):
        check.add_column(col, justify="right")
    for env_id, f in per_env.items():
        one = Rate(f["steps_s"], f["server_ms"], f["client_ms"])
        for processes, measured in ((1, one), (2, two[env_id])):
            projected = one.projected(processes, cores)
            ratio = measured.steps_s / projected
            row = [env_id, str(processes), f"{measured.steps_s:,.0f}", f"{projected:,.0f}",
                   f"{ratio:.2f}", "yes" if abs(ratio - 1) <= AIM_RATIO else "no",
                   f"{measured.steps_s * measured.server_ms / 1000 / processes:.0%}"]
            check.add_row(*row)
            print(" | ".join(row), flush=True)  # plain: one line a test can read
    console.print(check)

    rollout = Rollout(args.prompts, args.samples, args.steps)
    node = Node(args.node_cores, args.node_memory_gb * 1024)
    rows = projection(per_env, rollout, node, entry_bytes, args.clients)
    needed = nodes_needed(per_env, rollout, node)
    title = (f"Flights-v0, nodes of {node.cores} cores serving only; {rollout.prompts} prompts x "
             f"{rollout.samples} samples x {rollout.steps} steps a minute needs "
             f"{rollout.steps_s:,.0f} steps/s and {rollout.episodes:,} live episodes: {needed} node(s)")
    proj = Table(title=title)
    for col in ("nodes", "steps/s", "x the rollout's need", "memory used", "map KB a read",
                f"map KB/s ({args.clients} clients)", "replay after a node loss, s", "connections"):
        proj.add_column(col, justify="right")
    for r in rows:
        proj.add_row(f"{r['nodes']:,}", f"{r['steps_s']:,.0f}", f"{r['steps_s'] / r['need_steps_s']:.1f}",
                     f"{r['memory_share']:.0%}", f"{r['map_kb']:,.0f}", f"{r['map_kb_s']:,.0f}",
                     "-" if math.isinf(r["replay_stall_s"]) else f"{r['replay_stall_s']:.2f}",
                     f"{r['connections']:,}")
    console.print(proj)
    console.print(f"load average at the end {os.getloadavg()[0]:.2f}")
    if args.plot is not None:
        plot(rows, rollout, needed, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
