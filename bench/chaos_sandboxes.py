"""The chaos run's Docker parts: Bash-v0 episodes' scripts, and sandbox sessions on a sandbox cluster.

Not a benchmark itself (tests/bench runs every other `bench/*.py` in its quick mode): `chaos.py`
imports it. Where a Docker engine answers, the chaos run starts `agentrl sandbox serve --processes 2`
on loopback; the env holders' Bash-v0 episodes get their sandboxes from it, and sandbox sessions run
on it straight through `AsyncSandboxCluster`, while a second killer SIGKILLs its server processes.

What "the same" means here: a Bash-v0 episode is a fixed script of commands by its seed (a shell
variable, a working directory and files set by the first and read back later, a malformed call, a
plain-text turn, a `read_file`, then `finish`), none of which reads the clock, a process id or
anything random, so the same seed and script run in-process (on this process's own Docker backend)
must give the same observations, rewards and trajectory record (whose steps carry a hash of every
file the step changed). A sandbox session is a fixed script of execs in the sandbox's session shell
whose every answer (exit code, stdout, stderr) is known beforehand, written next to its command: a
replay that loses the shell's state or a file shows in the last exec's line.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import processes  # bench/processes.py: servers started, awaited and stopped

from agentrl.core import tool_call as _call
from agentrl.sandbox_server import AsyncSandboxCluster

BASH = "agentrl/Bash-v0"
BASH_OPTIONS = {"family": "count_files"}  # a task family whose workspace is built from the seed alone
SANDBOX_PROCESSES = 2
SANDBOX_MIN_KILLS, QUICK_SANDBOX_MIN_KILLS = 6, 2  # two servers restart 5 times each: 10 kills at most
THINK_S = 0.2  # between a session's execs, as an agent's turn would be: back to back they would take
# the two cores from the env holders under test (their steps' p50 went from 6 to 45 ms)


def docker_running() -> bool:
    """Whether a Docker engine answers here (the Bash-v0 episodes and sandbox sessions need one)."""
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode == 0


def bash_script(seed: int) -> list[str]:
    """Bash-v0 episode `seed`'s actions: state set, grown and read back, a malformed call, plain
    text, a `read_file`, and a `finish` whose answer is a guess by the seed (the script is fixed
    before the task is read, so the reward compared is mostly 0; the grading runs all the same)."""
    commands = [f"cd /workspace && mkdir -p w && echo line{seed} > w/f && export N=ep{seed}",
                *(f"echo {i} >> w/log && wc -l < w/log" for i in range(1 + seed % 3)),
                'echo "$N:$(pwd):$(cat w/f):$(wc -l < w/log)"']
    return [*(_call("execute_bash", command=c) for c in commands), "<tool_call>{bad", "no call here",
            _call("read_file", path="w/f"), _call("finish", answer=str(seed % 4))]


def session_script(k: int) -> list[tuple[str, int, str]]:
    """Sandbox session `k`'s execs, each with the exit code and stdout it must answer (stderr empty)."""
    appends = 6 + k % 3
    return [(f"mkdir -p /workspace/s && cd /workspace/s && echo line{k} > f && export N=s{k}", 0, ""),
            *((f"echo {i} >> log && wc -l < log", 0, f"{i + 1}\n") for i in range(appends)),
            ("(exit 3)", 3, ""),
            ('echo "$N:$(pwd):$(cat f):$(wc -l < log)"', 0, f"s{k}:/workspace/s:line{k}:{appends}\n")]


@dataclass
class Session:
    """What one sandbox session answered, against what it must have, or how it was lost."""

    index: int
    divergent: str | None = None
    lost: str | None = None
    replays: int = 0
    holders: set[str] = field(default_factory=set)


async def run_session(cluster: AsyncSandboxCluster, k: int,
                      exec_times: list[tuple[float, float, str]]) -> Session:
    """Session `k` on the sandbox cluster: a sandbox, its scripted execs each checked (`THINK_S`
    apart), then closed. Each exec's (start, end, holder before the call) goes to `exec_times`."""
    got = Session(k)
    try:
        sandbox = await cluster.create()
        try:
            for command, exit_code, stdout in session_script(k):
                await asyncio.sleep(THINK_S)
                holder = sandbox.holder
                got.holders.add(holder)
                began = time.perf_counter()
                result = await sandbox.exec(command, timeout_s=30)
                exec_times.append((began, time.perf_counter(), holder))
                seen = (result.exit_code, result.stdout, result.stderr)
                want = (exit_code, stdout, "")
                if seen != want and got.divergent is None:
                    got.divergent = f"{command!r} answered {seen!r} where {want!r} is right"
            got.holders.add(sandbox.holder)
            got.replays = sandbox.replays
        finally:
            await sandbox.aclose()
    except Exception as exc:  # counted and told: the aim is that none is lost
        got.lost = f"{type(exc).__name__}: {exc}"
    return got


@contextmanager
def sandbox_cluster(port: int, max_sandboxes: int) -> Iterator[str]:
    """`agentrl sandbox serve --processes 2` on `port` of loopback; yields its map's URL."""
    args = [sys.executable, "-m", "agentrl", "sandbox", "serve", "--port", str(port), "--pool-size", "2",
            "--max-sandboxes", str(max_sandboxes), "--processes", str(SANDBOX_PROCESSES)]
    url = f"http://127.0.0.1:{port}/v1/cluster"
    with processes.started(args, lambda: processes.answers(url), stop_timeout_s=120):
        yield url
