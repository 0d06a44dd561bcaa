"""Reward variance on Flights-v0: how many GRPO groups teach nothing, per task family.

GRPO learns from a group of G rollouts of one task only where their rewards differ; a group of
equal rewards (all 1 or all 0) has zero advantage and gives no gradient. This study plays G
rollouts of each task with the oracle and with a noisy oracle (the oracle's call with probability
p, otherwise a plausible wrong one), on the deterministic world and on the stochastic one (churn,
busy service, fare changes), and prints per family the mean reward, the mean within-group reward
variance and the fraction of zero-variance groups, with a PNG of both against p.

On the stochastic world each member of a group meets its own moving world: same task (same seed,
same `task_id`), reset option `world_seed=g` for member g, so churn and busy answers differ across
the group while every run stays reproducible. On the deterministic world only the policy's own
randomness makes rollouts differ.

    python bench/variance.py                  # 6 families x 8 tasks x G=8, six values of p
    python bench/variance.py --granularity fine
    python bench/variance.py --quick          # seconds (CI)
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from rich.console import Console
from rich.table import Table

import agentrl  # noqa: F401  (registers the ids)
from agentrl.flights.oracle import OraclePolicy, RandomPolicy
from agentrl.flights.tasks import FAMILIES

WORLDS = {"deterministic": False, "stochastic": True}


class NoisyOracle:
    """The oracle's next call with probability p, otherwise one of `RandomPolicy`'s wrong calls.

    The oracle sees only the answers to its own calls: its proposed call stays pending while noise
    is played and is proposed again, so its state never absorbs a stray answer. The noise is
    plausible (the request's airports, date, passengers and payment method; random flights,
    bookings and outcomes; text that is no call), as a half-trained model's mistakes are.
    """

    def __init__(self, p: float, seed: int) -> None:
        self.p = p
        self.rng = np.random.default_rng(seed)
        self.oracle = OraclePolicy()
        self.noise = RandomPolicy(int(self.rng.integers(2**31)))
        self.pending: str | None = None

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        if self.pending is None:
            self.pending = self.oracle(observation, info)
        noise = self.noise(observation, info)  # drawn every turn: the noise stream never depends on p
        if self.rng.random() < self.p:
            action, self.pending = self.pending, None
            return action
        return noise


@dataclass(frozen=True)
class Cell:
    """One (world, policy, family): its groups' rewards, G per task."""

    world: str
    policy: str
    p: float
    family: str
    groups: tuple[tuple[float, ...], ...]

    @property
    def mean(self) -> float:
        return float(np.mean(self.groups))

    @property
    def within_variance(self) -> float:
        return float(np.mean([np.var(g) for g in self.groups]))

    @property
    def zero_variance(self) -> float:
        return float(np.mean([np.ptp(g) == 0.0 for g in self.groups]))


def play(env: Any, policy: Any, seed: int, family: str, world_seed: int | None) -> float:
    options: dict[str, Any] = {"family": family}
    if world_seed is not None:
        options["world_seed"] = world_seed
    observation, info = env.reset(seed=seed, options=options)
    total, done = 0.0, False
    while not done:
        observation, reward, terminated, truncated, info = env.step(policy(observation, info))
        total += float(reward)
        done = terminated or truncated
    return total


def rollout_seed(seed: int, family: str, task: int, member: int, p: float) -> int:
    """The noisy policy's seed: the same in both worlds (common random numbers), distinct otherwise."""
    words = [seed, FAMILIES.index(family), task, member, round(p * 1000)]
    return int(np.random.SeedSequence(words).generate_state(1)[0])


def study(
    tasks: int,
    group: int,
    ps: tuple[float, ...],
    seed: int = 0,
    families: tuple[str, ...] = FAMILIES,
    granularity: str = "default",
) -> list[Cell]:
    """Every (world, policy, family) cell: `tasks` tasks per family, `group` rollouts per task."""
    cells = []
    for world, stochastic in WORLDS.items():
        env = gym.make("agentrl/Flights-v0", stochastic=stochastic, granularity=granularity).unwrapped
        try:
            for policy, p in [("oracle", 1.0), *(("noisy", p) for p in ps)]:
                for family in families:
                    groups = []
                    for task in range(tasks):
                        task_seed = seed + task
                        groups.append(
                            tuple(
                                play(
                                    env,
                                    OraclePolicy()
                                    if policy == "oracle"
                                    else NoisyOracle(p, rollout_seed(seed, family, task, g, p)),
                                    task_seed,
                                    family,
                                    g if stochastic else None,
                                )
                                for g in range(group)
                            )
                        )
                    cells.append(Cell(world, policy, p, family, tuple(groups)))
        finally:
            env.close()
    return cells


def print_tables(console: Console, cells: list[Cell], tasks: int, group: int, granularity: str) -> None:
    for world in WORLDS:
        title = f"Flights-v0, {world} world, {granularity} granularity: {tasks} tasks x G={group} per family"
        table = Table(title=title)
        for col in ("policy", "family", "mean reward", "within-group variance", "zero-variance groups"):
            table.add_column(col, justify="right")
        for cell in (c for c in cells if c.world == world):
            name = "oracle" if cell.policy == "oracle" else f"noisy p={cell.p:g}"
            table.add_row(
                name,
                cell.family,
                f"{cell.mean:.2f}",
                f"{cell.within_variance:.3f}",
                f"{cell.zero_variance:.2f}",
            )
        for policy, p in sorted({(c.policy, c.p) for c in cells if c.world == world}, key=lambda x: x[1]):
            row = [c for c in cells if (c.world, c.policy, c.p) == (world, policy, p)]
            table.add_row(
                f"[bold]{'oracle' if policy == 'oracle' else f'noisy p={p:g}'}[/bold]",
                "[bold]all[/bold]",
                f"{statistics.fmean(c.mean for c in row):.2f}",
                f"{statistics.fmean(c.within_variance for c in row):.3f}",
                f"{statistics.fmean(c.zero_variance for c in row):.2f}",
            )
        console.print(table)


def plot(cells: list[Cell], path: Path) -> Path:
    """Zero-variance fraction and mean reward against p, one line per family, one column per world."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(WORLDS), figsize=(11, 7), sharex=True, sharey="row")
    families = sorted({c.family for c in cells}, key=FAMILIES.index)
    for col, world in enumerate(WORLDS):
        for family in families:
            row = sorted((c for c in cells if (c.world, c.family) == (world, family)), key=lambda c: c.p)
            ps = [c.p for c in row]
            axes[0][col].plot(ps, [c.zero_variance for c in row], marker="o", label=family)
            axes[1][col].plot(ps, [c.mean for c in row], marker="o", label=family)
        axes[0][col].set_title(f"{world} world")
        axes[1][col].set_xlabel("p (probability of the oracle's call; 1 = oracle)")
    axes[0][0].set_ylabel("fraction of zero-variance groups")
    axes[1][0].set_ylabel("mean reward")
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=8, help="tasks (seeds) per family")
    parser.add_argument("--group", type=int, default=8, help="rollouts per task (G)")
    parser.add_argument("--p", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75, 0.9, 0.95])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--granularity", choices=("coarse", "default", "fine"), default="default")
    parser.add_argument("--png", default="variance.png", help="where the figure goes")
    parser.add_argument("--quick", action="store_true", help="2 tasks x G=4, p in 0, 0.8 (CI)")
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.group, args.p = 2, 4, [0.0, 0.8]
    console = Console(width=120)
    start = time.perf_counter()
    cells = study(args.tasks, args.group, tuple(args.p), args.seed, granularity=args.granularity)
    wall = time.perf_counter() - start
    print_tables(console, cells, args.tasks, args.group, args.granularity)
    png = plot(cells, Path(args.png))
    episodes = sum(len(c.groups) * args.group for c in cells)
    console.print(f"{episodes} episodes in {wall:.1f} s wall; figure: {png}")
    console.print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


if __name__ == "__main__":
    main()
