"""The `agentrl demo` command: oracle and random agents playing Flights-v0 over HTTP.

By default it starts an agentrl server on a free loopback port and plays against it.

The demo is its server's operator, so it turns on Flights-v0's privileged info (the task's family
and outcome) for its per-family table; the agents themselves read only the observations.

`play_episode` and `run_demo` only use the Gymnasium API and `(observation, info) -> action`
policies, so the same code plays against an env served over HTTP.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable
from typing import Any

Policy = Callable[[str, dict[str, Any]], str]


def play_episode(
    env: Any, policy: Policy, seed: int | None = None, options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Play one episode of any text gym.Env; returns the transcript and outcome."""
    observation, info = env.reset(seed=seed, options=options)
    transcript: dict[str, Any] = {
        "seed": seed,
        "options": options or {},
        "task": info.get("task"),
        "tools": info.get("tools", []),
        "task_text": observation,
        "steps": [],
        "reward": 0.0,
    }
    done = False
    while not done:
        action = policy(observation, info)
        observation, reward, terminated, truncated, info = env.step(action)
        transcript["steps"].append(
            {"action": action, "observation": observation, "reward": reward, "progress": info.get("progress")}
        )
        transcript["reward"] += reward
        done = terminated or truncated
    transcript["terminated"] = terminated
    transcript["final_progress"] = info.get("progress")
    return transcript


def run_demo(
    make_env: Callable[[], Any],
    policies: dict[str, Callable[[], Policy]],
    episodes: int = 50,
    seed: int = 0,
    families: tuple[str, ...] = (),
    show: int = 1,
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
                transcript = play_episode(env, factory(), seed + i, options)
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

    if args.sft:
        from agentrl.flights.oracle import export_oracle_jsonl

        written = export_oracle_jsonl(args.sft, args.episodes, seed=args.seed, env_kwargs=kwargs)
        print(f"wrote {written} oracle episodes as chat JSONL to {args.sft}")
    with contextlib.ExitStack() as stack:
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
        )
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
    parser.add_argument("--sft", metavar="PATH", help="also write oracle episodes as chat JSONL for SFT")
    parser.set_defaults(handler=_handler)
