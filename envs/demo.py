"""The `agentrl demo` command: oracle and random agents playing Flights-v0 over HTTP.

By default it starts an agentrl server on a free loopback port and plays against it.

The demo is its server's operator, so it turns on Flights-v0's privileged info (the task's family
and outcome) for its per-family table; the agents themselves read only the observations.

Episodes are played by the episode driver (`agentrl.driver.play`) with `(observation, info) ->
action` policies, through the Gymnasium API, so the same code plays against an env served over
HTTP. What the demo shows and writes of an episode are views of its trajectory record
(`agentrl.trajectory/1`, from the env or, over HTTP, from its server): the printed transcript and
success table (`summary`), the JSONL of records (`--trajectories`) and, for the oracle's
successes, OpenAI tool-call chat lines (`--sft`, `oracle.record_chat`).
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from agentrl.driver import Episode, Outcome, Policy, play

# called after each episode with the agent's name, the episode's trajectory record and its summary
EpisodeHook = Callable[[str, dict[str, Any], dict[str, Any]], None]


def play_episode(
    env: Any, policy: Policy, seed: int | None = None, options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Play one episode of an agentrl env (in-process or a `RemoteEnv`); returns its summary
    (`summary`), a view of the episode's trajectory record."""
    episode = Episode(env)
    outcome = play(episode, policy, seed, options)
    return summary(episode.record(), outcome)


def summary(record: dict[str, Any], outcome: Outcome) -> dict[str, Any]:
    """What the demo prints and its callers read of one episode: the record's steps (action,
    observation, reward) and return, with what only the env's info says (the task, the tools, the
    final progress), from the driver's `Outcome`."""
    steps = [{"action": s["action"], "observation": s["observation"], "reward": s["reward"]}
             for s in record["steps"]]
    return {
        "seed": outcome.seed,
        "options": outcome.options or {},
        "task": outcome.info.get("task"),
        "tools": outcome.info.get("tools", []),
        "task_text": record["observation"],
        "steps": steps,
        "reward": sum(step["reward"] for step in steps),
        "terminated": bool(steps and record["steps"][-1]["terminated"]),
        "final_progress": outcome.last_info.get("progress"),
    }


def run_demo(
    make_env: Callable[[], Any],
    policies: dict[str, Callable[[], Policy]],
    episodes: int = 50,
    seed: int = 0,
    families: tuple[str, ...] = (),
    show: int = 1,
    on_episode: EpisodeHook | None = None,
) -> dict[str, float]:
    """Play each policy on the same seeded episodes; print one transcript and a table of success rates."""
    from rich.console import Console
    from rich.panel import Panel
    from rich.progress import track
    from rich.table import Table

    console = Console()
    env = make_env()
    rates: dict[str, float] = {}
    per_family: dict[str, dict[str, list[float]]] = {}
    try:
        for name, factory in policies.items():
            rewards = []
            for i in track(range(episodes), description=f"{name:>8} agent", console=console):
                options = {"family": families[i % len(families)]} if families else None
                episode = Episode(env)
                outcome = play(episode, factory(), seed + i, options)
                record = episode.record()
                transcript = summary(record, outcome)
                if on_episode is not None:
                    on_episode(name, record, transcript)
                success = float(transcript["reward"] >= 1.0)
                rewards.append(success)
                family = (transcript["task"] or {}).get("family", "-")
                per_family.setdefault(family, {}).setdefault(name, []).append(success)
                if i < show and name == next(iter(policies)):
                    _print_transcript(console, Panel, name, transcript)
            rates[name] = sum(rewards) / len(rewards)
    finally:
        env.close()
    table = Table(title=f"Success rate over {episodes} episodes per agent")
    table.add_column("family")
    for name in policies:
        table.add_column(name, justify="right")
    for family, by_policy in sorted(per_family.items()):
        table.add_row(
            family,
            *[f"{sum(by_policy.get(n, [0])) / max(1, len(by_policy.get(n, []))):.2f}" for n in policies],
        )
    table.add_row("[bold]all[/bold]", *[f"[bold]{rates[n]:.2f}[/bold]" for n in policies])
    console.print(table)
    return rates


def chat_line(record: dict[str, Any], task: dict[str, Any] | None) -> dict[str, Any]:
    """A Flights-v0 record as the OpenAI tool-call chat line `--sft` writes (`oracle.record_chat`)."""
    from agentrl.flights.oracle import record_chat

    return record_chat(record, task)


def export_oracle_jsonl(
    path: str | Path,
    n_episodes: int,
    *,
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    only_successes: bool = True,
) -> int:
    """Play the oracle on seeds seed..seed+n-1 and write chat JSONL; returns lines written.

    The env is built with privileged info, so each line also names its family and outcome.
    """
    import gymnasium as gym

    import agentrl  # noqa: F401  (registers the ids)
    from agentrl.flights.oracle import OraclePolicy

    env = gym.make("agentrl/Flights-v0", **{**(env_kwargs or {}), "privileged_info": True})
    episode = Episode(env.unwrapped)
    written = 0
    with Path(path).open("w", encoding="utf-8") as out:
        for s in range(seed, seed + n_episodes):
            outcome = play(episode, OraclePolicy(), s)
            if only_successes and outcome.reward < 1.0:
                continue
            line = chat_line(episode.record(), outcome.info.get("task"))
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
            written += 1
    episode.close()
    return written


class EpisodeFiles:
    """The demo's outputs: every episode's record (JSONL) and the oracle's successes as chat lines."""

    def __init__(self, trajectories: TextIO | None, sft: TextIO | None) -> None:
        self.trajectories, self.sft = trajectories, sft
        self.records = self.sft_lines = 0

    def __call__(self, agent: str, record: dict[str, Any], transcript: dict[str, Any]) -> None:
        keep_sft = self.sft is not None and agent == "oracle" and transcript["reward"] >= 1.0
        if self.trajectories is not None:
            self.trajectories.write(json.dumps({**record, "agent": agent}, ensure_ascii=False) + "\n")
            self.records += 1
        if keep_sft and self.sft is not None:
            self.sft.write(json.dumps(chat_line(record, transcript["task"]), ensure_ascii=False) + "\n")
            self.sft_lines += 1


def _print_transcript(console: Any, panel: Any, name: str, transcript: dict[str, Any]) -> None:
    task = transcript["task"] or {}
    console.print(
        panel(
            str(task.get("text", transcript["task_text"][:500])),
            title=f"{name} agent · seed {transcript['seed']} · {task.get('family', '')} "
            f"{task.get('outcome', '')}",
        )
    )
    for n, step in enumerate(transcript["steps"], 1):
        console.print(f"[bold cyan]turn {n} ▶[/bold cyan] {step['action']}", markup=True, highlight=False)
        text = step["observation"]
        console.print(f"[dim]{text[:400] + (' …' if len(text) > 400 else '')}[/dim]", highlight=False)
    console.print(
        f"[bold]reward {transcript['reward']:.2f}[/bold]  progress {transcript['final_progress']}\n"
    )


def _handler(args: argparse.Namespace) -> int:
    import contextlib

    import agentrl  # noqa: F401  (registers the ids)
    from agentrl.flights.oracle import OraclePolicy, RandomPolicy
    from agentrl.registration import make_env as make_any

    seeds = itertools.count(args.seed)
    kwargs: dict[str, Any] = {"days": args.days, "stochastic": args.stochastic}
    # the demo is the operator of its own server (or env): the per-family table needs the answer key
    operator = {"privileged_info": True}

    with contextlib.ExitStack() as stack:
        opened = [
            stack.enter_context(Path(path).open("w", encoding="utf-8")) if path else None
            for path in (args.trajectories, args.sft)
        ]
        files = EpisodeFiles(*opened)
        base_url = args.base_url
        if base_url is None and not args.in_process:
            from agentrl.server.config import ServerConfig
            from agentrl.server.local import serve_in_thread

            config = ServerConfig(env_kwargs={"agentrl/Flights-v0": operator})
            base_url = stack.enter_context(serve_in_thread(config))
            print(f"agentrl server listening on {base_url}; the agents play over HTTP")
        local = operator if args.in_process else {}
        rates = run_demo(
            lambda: make_any("agentrl/Flights-v0", base_url=base_url, **kwargs, **local),
            {"oracle": OraclePolicy, "random": lambda: RandomPolicy(next(seeds))},
            episodes=args.episodes,
            seed=args.seed,
            families=tuple(args.families or ()),
            on_episode=files,
        )
    if args.trajectories:
        print(f"wrote {files.records} trajectory records to {args.trajectories}")
    if args.sft:
        print(f"wrote {files.sft_lines} oracle episodes as chat JSONL to {args.sft}")
    return 0 if rates["oracle"] == 1.0 else 1


def add_cli(subparsers: Any) -> None:
    parser = subparsers.add_parser("demo", help="oracle and random agents playing Flights-v0 episodes")
    parser.add_argument("--episodes", type=int, default=70, help="episodes per agent")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--days", type=int, default=1, help="days in the flight schedule")
    parser.add_argument("--stochastic", action="store_true", help="churn, busy service and fare changes")
    parser.add_argument("--families", nargs="*", help="task families to cycle through (default: all)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--base-url", default=None, help="play against this agentrl server")
    where.add_argument("--in-process", action="store_true", help="play without a server")
    parser.add_argument(
        "--trajectories", metavar="PATH", help="write every episode's trajectory record, one JSON a line"
    )
    parser.add_argument("--sft", metavar="PATH", help="write the oracle's successes as chat JSONL for SFT")
    parser.set_defaults(handler=_handler)
