"""Benchmark of Bash-v0 / Code-v0 episodes: reset latency with and without the warm container pool,
tool-call latency in-process vs through `agentrl serve` (loopback), and the latency of `finish`
(every process of the agent killed, then the host-side verdict).

    .venv/bin/python bench/code_envs.py            # full run (~2 minutes)
    .venv/bin/python bench/code_envs.py --quick    # short run (~40 s)

A reset hands the previous container back, takes a new one (a pool hand-over, or a container
start when the pool is off), uploads the seeded workspace as one tar and runs the task's setup.
Between measured resets the bench pauses (unmeasured) so the pool can refill, as it does between
episodes of a real rollout worker; without a pool the pause changes nothing. A `run_python` cell is an
exec in the same session shell as `execute_bash` (see `agentrl.code_envs.repl`), so its ratio to
that baseline is what the interpreter adds to a shell command. After every step of a tool that can
write, the env lists the workspace for fork replay (`agentrl.code_envs.workspace.listing`); the last
table times such a step with no listing (baseline), with the listing by `find` and `sha256sum`, and
with the listing script the envs use, interleaved in one episode.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import time
from collections.abc import Callable
from typing import Any
from unittest import mock

import gymnasium as gym
import numpy as np
from rich.console import Console
from rich.table import Table

import agentrl  # noqa: F401  (registers the envs)
from agentrl.code_envs import base_env
from agentrl.code_envs.bash_env import BashEnv
from agentrl.code_envs.workspace import LISTING_COMMAND, LISTING_MAX_BYTES, listing, read_listing
from agentrl.core import tool_call as call
from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread

console = Console(width=120)
FAMILY = "log_errors"


def timed(fn: Callable[[], Any], n: int, pause_s: float = 0.0) -> np.ndarray:
    samples = []
    for _ in range(n):
        if pause_s:
            time.sleep(pause_s)
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return np.array(samples)


def resets(env: gym.Env, n: int, pause_s: float, family: str = FAMILY) -> np.ndarray:
    env.reset(seed=0, options={"family": family})  # warm-up: imports, first pool fill
    time.sleep(1.0)
    return timed(lambda: env.reset(options={"family": family}), n, pause_s)


def tool_calls(env: gym.Env, action: str, n: int) -> np.ndarray:
    env.reset(seed=0, options={"family": FAMILY if "Bash" in str(env.spec.id) else "implement"})
    env.step(action)  # warm-up
    return timed(lambda: env.step(action), n)


def finishes(env: gym.Env, family: str, n: int) -> np.ndarray:
    """`finish` right after a reset: processes reset, facts gathered one-shot, verdict on the host."""
    samples = []
    for seed in range(n):
        env.reset(seed=seed, options={"family": family})
        start = time.perf_counter()
        env.step(call("finish", answer=""))
        samples.append((time.perf_counter() - start) * 1000)
    return np.array(samples)


def listing_by_find(sandbox: Any) -> dict[str, str] | str:
    """The workspace listing as one-shot `find ... -exec sha256sum` takes it (the script's fallback)."""
    return read_listing(sandbox.exec(LISTING_COMMAND, mode="oneshot", max_output_bytes=LISTING_MAX_BYTES))


LISTINGS: dict[str, Callable[[Any], Any]] = {
    "no listing": lambda sandbox: {},
    "listing by find + sha256sum": listing_by_find,
    "listing by script (default)": listing,
}


def tracked_steps(env: gym.Env, family: str, action: str, n: int) -> dict[str, np.ndarray]:
    """One writing step with each way of listing the workspace after it (what forks compare),
    interleaved sample by sample in one episode, so load changes hit every variant alike."""
    env.reset(seed=0, options={"family": family})
    samples: dict[str, list[float]] = {name: [] for name in LISTINGS}
    for i in range(n + 1):
        for name, take in LISTINGS.items():
            with mock.patch.object(base_env, "listing", take):
                start = time.perf_counter()
                env.step(action)
                if i:  # the first round warms up
                    samples[name].append((time.perf_counter() - start) * 1000)
    return {name: np.array(s) for name, s in samples.items()}


def machine() -> str:
    docker = subprocess.run(
        ["docker", "version", "-f", "{{.Server.Version}}"], capture_output=True, text=True
    )
    load = os.getloadavg()[0]
    return (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {load:.1f}, "
        f"Python {platform.python_version()}, Docker {docker.stdout.strip() or '?'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args()
    n_reset, n_call = (8, 40) if args.quick else (25, 200)
    pause = 0.6
    rows: list[tuple[str, np.ndarray, str]] = []

    def make(env_id: str, **kw: Any) -> gym.Env:
        return gym.make(env_id, max_turns=10**6, **kw)

    with console.status("reset latency, in-process"):
        cold = make("agentrl/Bash-v0", pool_size=0)
        warm = make("agentrl/Bash-v0", pool_size=4)
        rows.append(("reset Bash-v0, no pool (baseline)", resets(cold, n_reset, pause), "in-process"))
        rows.append(("reset Bash-v0, warm pool", resets(warm, n_reset, pause), "in-process"))
        rows.append(
            ("reset Bash-v0 git task, warm pool", resets(warm, n_reset, pause, "git_ops"), "in-process")
        )
        bash_local = tool_calls(warm, call("execute_bash", command="echo hi"), n_call)
        log = next(
            p for p in BashEnv.make_task("log_errors", "train", 0).workspace if not p.endswith(".1.log")
        )
        read_local = tool_calls(warm, call("read_file", path=log), n_call)
        cold.close()
        code = make("agentrl/Code-v0", pool_size=4)
        python_local = tool_calls(code, call("run_python", code="x = 1 + 1"), n_call)
        n_tracked = n_call // 4
        tracked = {
            "execute_bash, Bash-v0 git_ops": tracked_steps(
                warm, "git_ops", call("execute_bash", command="echo hi >> notes.txt"), n_tracked
            ),
            "run_python, Code-v0 implement": tracked_steps(
                code, "implement", call("run_python", code="x = 1 + 1"), n_tracked
            ),
        }
        finish_bash = finishes(warm, FAMILY, max(4, n_reset // 2))
        finish_code = finishes(code, "module_suite", max(4, n_reset // 2))
        code.close()
    with console.status("through the server"), serve_in_thread(ServerConfig()) as url:
        remote = make("agentrl/Bash-v0", base_url=url, pool_size=4)
        rows.append(("reset Bash-v0, warm pool", resets(remote, n_reset, pause), "HTTP"))
        bash_remote = tool_calls(remote, call("execute_bash", command="echo hi"), n_call)
        remote.close()
    warm.close()
    rows += [
        ("execute_bash 'echo hi' (baseline)", bash_local, "in-process"),
        ("execute_bash 'echo hi'", bash_remote, "HTTP"),
        ("read_file (20 KB log)", read_local, "in-process"),
        ("run_python cell (Code-v0)", python_local, "in-process"),
        ("finish -> verdict, Bash-v0 log_errors", finish_bash, "in-process"),
        ("finish -> verdict, Code-v0 module_suite", finish_code, "in-process"),
    ]

    table = Table(title="Bash-v0 / Code-v0 latency (ms)")
    for column in ("measurement", "via", "n", "median", "p90", "p99", "vs baseline"):
        table.add_column(column, justify="left" if column in ("measurement", "via") else "right")
    baselines = {"reset": np.median(rows[0][1]), "tool": np.median(bash_local)}
    for name, samples, via in rows:
        base = baselines["reset" if name.startswith(("reset", "finish")) else "tool"]
        ratio = np.median(samples) / base
        table.add_row(
            name,
            via,
            str(len(samples)),
            f"{np.median(samples):.1f}",
            f"{np.percentile(samples, 90):.1f}",
            f"{np.percentile(samples, 99):.1f}",
            f"{ratio:.2f}x",
        )
    console.print(table)
    cold_ms, warm_ms = np.median(rows[0][1]), np.median(rows[1][1])
    console.print(
        f"warm pool speeds a reset up {cold_ms / warm_ms:.1f}x; HTTP adds "
        f"{np.median(bash_remote) - np.median(bash_local):.2f} ms per tool call (median)"
    )
    listed = Table(title="A writing step and the workspace listing after it (ms)")
    for column in ("step", "listing", "n", "median", "p90", "vs no listing"):
        listed.add_column(column, justify="left" if column in ("step", "listing") else "right")
    for step, by_way in tracked.items():
        base = np.median(by_way["no listing"])
        for way, samples in by_way.items():
            median, p90 = np.median(samples), np.percentile(samples, 90)
            ratio = f"{median / base:.2f}x"
            listed.add_row(step, way, str(len(samples)), f"{median:.1f}", f"{p90:.1f}", ratio)
    console.print(listed)
    console.print(f"machine: {machine()}")


if __name__ == "__main__":
    main()
