"""Every benchmark keeps running: each `bench/*.py --quick` runs to the end as its own process.

A benchmark no test runs rots (an API changes under it and nobody notices until its figure is
needed again); the quick modes are small enough for CI.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import unavailable

ROOT = Path(__file__).resolve().parents[2]
# benches whose quick mode a test of their own runs and checks further
RUN_ELSEWHERE = {"trainer.py"}  # tests/bench/test_trainer_bench.py
# modules the benches import, not benches themselves
HELPERS = {"chaos_sandboxes.py", "client_processes.py", "measuring.py", "preauth.py", "processes.py",
           "recipes.py", "serving.py", "trainer_work.py"}
BENCHES = sorted(p.name for p in (ROOT / "bench").glob("*.py") if p.name not in RUN_ELSEWHERE | HELPERS)
NEEDS_DOCKER = {"sandbox.py", "code_envs.py", "sandbox_processes.py", "cluster.py"}


def docker_running() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode == 0


def test_every_bench_is_covered():
    assert {"rollouts.py", "two_stage.py", "flights.py", "decode.py"} <= set(BENCHES)
    assert all((ROOT / "bench" / name).is_file() for name in RUN_ELSEWHERE | HELPERS)


@pytest.mark.slow
@pytest.mark.parametrize("bench", BENCHES)
def test_bench_runs_in_quick_mode(bench, tmp_path):
    if bench in NEEDS_DOCKER and not docker_running():
        unavailable("the Docker engine is not running")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    args = [sys.executable, str(ROOT / "bench" / bench), "--quick"]
    if bench == "two_stage.py":
        args += ["--out", str(tmp_path / "two_stage"), "--threads", "1"]
    done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, f"{bench} --quick failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.stdout.strip(), f"{bench} --quick printed nothing"
    if bench == "cluster.py":
        check_bash_kill_row(done.stdout)
        check_memory_rows(done.stdout)
        check_busy_rows(done.stdout, ("Echo-v0 | 16 | 1 process | ", "Echo-v0 | 16 | 2 processes | "), 4, 6)
    if bench == "sandbox_processes.py":
        for size in ("1", "8"):
            check_busy_rows(done.stdout, (f"{size} | 1 | ", f"{size} | 2 | "), 3, 4)
    if bench == "chaos.py" and docker_running():
        check_chaos_docker_parts(done.stdout)
    if bench == "capacity.py":
        check_capacity_rows(done.stdout)


def check_busy_rows(stdout: str, starts: tuple[str, str], rate_col: int, servers_col: int) -> None:
    """bench/cluster.py's steps/s rows and bench/sandbox_processes.py's "which side was busy" rows: a
    row for one server process and one for two (`starts`), each with a figure, each server process's
    share of a core (one share, then two, from /proc) and the client processes' share beside it."""
    for start, holders in zip(starts, (1, 2), strict=True):
        rows = [line.split(" | ") for line in stdout.splitlines() if line.startswith(start)]
        rows = [r for r in rows if len(r) > servers_col + 1 and r[servers_col].endswith("%")]
        assert len(rows) == 1, (start, stdout[-3000:])
        shares, clients = rows[0][servers_col].split(" + "), rows[0][servers_col + 1]
        assert len(shares) == holders and clients.endswith("%") and clients != "0%", rows[0]
        assert float(rows[0][rate_col].replace(",", "")) > 0, rows[0]


def check_memory_rows(stdout: str) -> None:
    """bench/cluster.py's memory rows: both shapes on one process and on two, every episode held by
    some holder, each holder's figures read (a live episode holds memory)."""
    for shape in ("a rollout: 8 episodes a seed", "a seed each"):
        for server, holders in (("1 process", 1), ("2 processes", 2)):
            start = f"{shape} | {server} | "
            rows = [line.split(" | ") for line in stdout.splitlines() if line.startswith(start)]
            assert len(rows) == holders, (shape, server, stdout[-3000:])
            assert sum(int(r[3].replace(",", "")) for r in rows) == 100, rows
            assert all(float(r[7]) > 0 for r in rows), rows


def check_capacity_rows(stdout: str) -> None:
    """bench/capacity.py's check of its model: a row per env for 1 and 2 processes, each with a
    measured figure and the projection's (the ratio is the machine's to judge, not CI's)."""
    rows = [line.split(" | ") for line in stdout.splitlines() if line.startswith("agentrl/")]
    assert {(r[0], r[1]) for r in rows} == {(env, n) for env in ("agentrl/Echo-v0", "agentrl/Flights-v0")
                                            for n in ("1", "2")}, stdout[-3000:]
    assert all(float(r[2].replace(",", "")) > 0 and float(r[3].replace(",", "")) > 0 for r in rows), rows


def check_chaos_docker_parts(stdout: str) -> None:
    """bench/chaos.py with Docker: Bash-v0 episodes ran, none lost or divergent; sandbox sessions ran
    while sandbox servers were killed, none lost or divergent."""
    bash = re.search(r"of which Bash-v0: (\d+) episodes, \d+ moved holder, (\d+) lost, (\d+) divergent",
                     stdout)
    assert bash, f"no Bash-v0 line in:\n{stdout[-3000:]}"
    assert int(bash[1]) >= 1 and bash[2] == bash[3] == "0", bash[0]
    boxes = re.search(r"sandbox sessions: (\d+) \(\d+ execs\); sandbox-server kills: (\d+);.*"
                      r"sessions lost: (\d+); divergent: (\d+)", stdout)
    assert boxes, f"no sandbox sessions line in:\n{stdout[-3000:]}"
    assert int(boxes[1]) >= 1 and int(boxes[2]) >= 2 and boxes[3] == boxes[4] == "0", boxes[0]


@pytest.mark.slow
def test_flights_recipe_runs_in_quick_mode(tmp_path):
    """`two_stage.py --env flights --quick`: the Flights-v0 recipe end to end on a tiny model, with the
    held-out tables, the curves and the figures written; a held-out task id never trained on."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    out = tmp_path / "two_stage"
    args = [
        sys.executable,
        str(ROOT / "bench" / "two_stage.py"),
        "--env",
        "flights",
        "--quick",
        "--out",
        str(out),
        "--threads",
        "1",
    ]
    done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, (
        f"two_stage.py --env flights failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    assert "Held-out success per task family" in done.stdout
    summary = json.loads((out / "two_stage.json").read_text())
    assert summary["env"] == "agentrl/Flights-v0" and [s["name"] for s in summary["stages"]] == [
        "base",
        "after SFT",
        "after GRPO",
    ]
    assert all(s["n"] == 8 for s in summary["stages"]) and summary["per_family"]
    assert summary["tasks"]["overlap"] == 0 and summary["tasks"]["train_tasks"] > 0
    assert (out / "two_stage.png").stat().st_size > 10_000


def check_bash_kill_row(stdout: str) -> None:
    """bench/cluster.py's Bash-v0 kill row is there, replayed some episode, and lost none silently."""
    rows = [line.split(" | ") for line in stdout.splitlines() if line.startswith("Bash-v0 | ")]
    assert len(rows) == 1, f"no Bash-v0 kill row in:\n{stdout[-3000:]}"
    ((_, live, _, replayed, _, ms_per_step, _, lost_error, _, silent, _),) = rows
    assert silent == "0", f"Bash-v0 episodes lost silently: {rows[0]}"
    assert int(replayed) >= 1 and float(ms_per_step) > 0, rows[0]
    assert int(replayed) + int(lost_error) <= int(live), rows[0]


@pytest.mark.slow
def test_chaos_run_with_ray_actors(tmp_path):
    """`chaos.py --quick --ray`: the holders are Ray actors of a local Ray on loopback, SIGKILLed at
    random; no episode lost or divergent, and the kills landed."""
    if importlib.util.find_spec("ray") is None:
        unavailable("ray is not installed (the [cluster] extra)")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    args = [sys.executable, str(ROOT / "bench" / "chaos.py"), "--quick", "--ray", "--no-sandboxes"]
    done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, f"chaos --ray failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "episodes lost: 0 (" in done.stdout and "divergent: 0" in done.stdout, done.stdout
