"""Fork latency per env, in-process and over HTTP, against a reset-and-replay baseline.

A fork gives n episodes in the state an episode has reached; without it a caller rebuilds that
state itself: a new env (a new episode over HTTP), a reset with the same seed, then every action
again. That is the baseline, measured in the same run at the same episode depths (steps taken
before the fork). Echo-v0, Flights-v0 and Search-v0 fork by copying their state (Flights copies the
episode database), so their fork costs about the same at any depth while the replay grows with it;
Bash-v0 and Code-v0 fork by replaying into a container of their own, so there fork and baseline
cost about the same. Bash-v0/Code-v0 run only where the Docker engine is.

    python bench/fork.py            # depths 2, 8, 32
    python bench/fork.py --quick    # depths 2 and 8, few repetitions (CI)
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
from rich.console import Console
from rich.table import Table

import agentrl  # noqa: F401  (registers the ids)
from agentrl.client import EnvClient
from agentrl.core import tool_call as call
from agentrl.flights.oracle import parse_request
from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread

Actions = Callable[[str, dict[str, Any], int], str]  # (first observation, first info, step) -> action


@dataclass(frozen=True)
class Subject:
    env_id: str
    kwargs: dict[str, Any]
    actions: Actions
    options: dict[str, Any] | None = None
    docker: bool = False


def _flights(observation: str, info: dict[str, Any], i: int) -> str:
    request = parse_request(observation)
    return call("search_flights", origin=request["origin"], destination=request["destination"],
                date=request["date"])


SUBJECTS = {
    "Echo-v0": Subject("agentrl/Echo-v0", {"max_turns": 10_000},
                       lambda o, i, n: call("echo", text=f"step {n}")),
    "Flights-v0": Subject("agentrl/Flights-v0", {"max_turns": 10_000}, _flights, {"family": "cheapest"}),
    "Search-v0": Subject("agentrl/Search-v0", {"max_turns": 10_000},
                         lambda o, i, n: f"<search>{i['question']} {n}</search>"),
    "Bash-v0": Subject("agentrl/Bash-v0", {"max_turns": 10_000, "pool_size": 2},
                       lambda o, i, n: call("execute_bash", command=f"echo {n} >> notes.txt"),
                       {"family": "log_errors"}, docker=True),
    "Code-v0": Subject("agentrl/Code-v0", {"max_turns": 10_000, "pool_size": 2},
                       lambda o, i, n: call("run_python", code=f"x{n} = {n}"),
                       {"family": "implement"}, docker=True),
}


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def in_process(subject: Subject, depth: int, reps: int, seed: int = 0) -> tuple[list[float], list[float]]:
    """(fork times, reset-and-replay times) of an episode `depth` steps deep, in this process."""
    env = gym.make(subject.env_id, **subject.kwargs).unwrapped
    observation, info = env.reset(seed=seed, options=subject.options)
    actions = [subject.actions(observation, info, n) for n in range(depth)]
    for action in actions:
        env.step(action)
    forks = []
    for _ in range(reps + 1):  # the first, untimed, pays one-off costs
        start = time.perf_counter()
        (child,) = env.fork(1)
        forks.append(time.perf_counter() - start)
        child.close()
    del forks[0]

    def replay() -> None:
        fresh = gym.make(subject.env_id, **subject.kwargs).unwrapped
        fresh.reset(seed=seed, options=subject.options)
        for action in actions:
            fresh.step(action)
        fresh.close()

    replays = [timed(replay) for _ in range(reps)]
    env.close()
    return forks, replays


def over_http(client: EnvClient, subject: Subject, depth: int, reps: int,
              seed: int = 0) -> tuple[list[float], list[float], list[float]]:
    """The same over HTTP: `POST .../fork` against a new episode replaying the actions; and the
    round trip of a call that does no work (`GET` the episode's status), the floor under both."""
    first = client.create_episode(subject.env_id, seed=seed, options=subject.options,
                                  env_kwargs=subject.kwargs)
    actions = [subject.actions(first.observation, first.info, n) for n in range(depth)]
    for action in actions:
        client.step(first.episode_id, action)
    forks = []
    for _ in range(reps + 1):  # the first, untimed, pays one-off costs
        start = time.perf_counter()
        (made,) = client.fork_episode(first.episode_id, 1)
        forks.append(time.perf_counter() - start)
        client.close_episode(made.episode_id)
    del forks[0]

    def replay() -> None:
        fresh = client.create_episode(subject.env_id, seed=seed, options=subject.options,
                                      env_kwargs=subject.kwargs)
        for action in actions:
            client.step(fresh.episode_id, action)
        client.close_episode(fresh.episode_id)

    replays = [timed(replay) for _ in range(reps)]
    trips = [timed(lambda: client.episode_status(first.episode_id)) for _ in range(reps)]
    client.close_episode(first.episode_id)
    return forks, replays, trips


def docker_running() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode == 0


def machine() -> str:
    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
            f"load {os.getloadavg()[0]:.1f}, Python {platform.python_version()}, "
            f"{platform.system()} {platform.release()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[2, 8, 32])
    parser.add_argument("--reps", type=int, default=10, help="forks and replays timed per depth")
    parser.add_argument("--docker-reps", type=int, default=3, help="the same for Bash-v0 and Code-v0")
    parser.add_argument("--envs", nargs="+", default=list(SUBJECTS), choices=list(SUBJECTS))
    parser.add_argument("--quick", action="store_true",
                        help="depths 2 and 8, 3 repetitions, a small corpus (CI)")
    args = parser.parse_args()
    if args.quick:
        args.depths, args.reps, args.docker_reps = [2, 8], 3, 1
    SUBJECTS["Search-v0"].kwargs["world_passages"] = 600 if args.quick else 10_000
    console = Console(width=130)
    docker = docker_running()
    names = [n for n in args.envs if docker or not SUBJECTS[n].docker]
    table = Table(title="Fork latency: one fork against reset-and-replay (median ms)")
    for col in ("env", "depth", "fork", "reset + replay", "ratio", "fork HTTP", "replay HTTP", "ratio HTTP",
                "HTTP round trip"):
        table.add_column(col, justify="right")
    with serve_in_thread(ServerConfig(max_episodes=64)) as url, EnvClient(url, timeout=300) as client:
        for name in names:
            subject = SUBJECTS[name]
            reps = args.docker_reps if subject.docker else args.reps
            for depth in args.depths:
                with console.status(f"{name}, depth {depth}"):
                    local_fork, local_replay = map(median_ms, in_process(subject, depth, reps))
                    http_fork, http_replay, trip = map(median_ms, over_http(client, subject, depth, reps))
                table.add_row(name, str(depth), f"{local_fork:.2f}", f"{local_replay:.2f}",
                              f"{local_replay / local_fork:.1f}x", f"{http_fork:.2f}", f"{http_replay:.2f}",
                              f"{http_replay / http_fork:.1f}x", f"{trip:.2f}")
    console.print(table)
    if not docker:
        console.print("Bash-v0 and Code-v0 left out: the Docker engine is not running")
    console.print("ratio: reset-and-replay time / fork time; HTTP round trip: GET of the episode's status, "
                  "the floor under every HTTP figure")
    console.print(f"machine: {machine()}")


if __name__ == "__main__":
    main()
