"""The server benches' shared parts: the servers they start and the actions they step them with.

Not a benchmark itself (tests/bench runs every other `bench/*.py` in its quick mode): `bench/server.py`
(steps) and `bench/episodes.py` (whole episodes) measure the same two servers, so what starts them
lives here once: `agentrl serve` with Echo-v0 and Flights-v0, the echo env generated from OpenEnv's
template behind OpenEnv's `create_app`, each run until it answers and stopped after, and the tool
call each env is stepped with. The benches import it as they import each other, with their own
folder on `sys.path`. Everything talks over loopback only.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import processes  # bench/processes.py: servers started, awaited and stopped

ECHO, FLIGHTS = "agentrl/Echo-v0", "agentrl/Flights-v0"
OPENENV = "OpenEnv echo"


# --- the actions ---------------------------------------------------------------------------------
def call(name: str, **arguments: Any) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def action_for(env_id: str, info: dict[str, Any]) -> str:
    """A real tool call: Echo echoes; Flights runs a search query against the episode's database."""
    if env_id == FLIGHTS:
        task = info["task"]["request"]
        return call(
            "search_flights", origin=task["origin"], destination=task["destination"], date=task["date"]
        )
    return call("echo", text="hello")


# --- the servers ---------------------------------------------------------------------------------
def process(cmd: list[str], url: str,
            cwd: str | None = None) -> AbstractContextManager[subprocess.Popen[bytes]]:
    """`cmd` (a server answering at `url`) run until `/health` answers; yields the process."""
    env = {**os.environ, "AGENTRL_TOKEN": "", "OMP_NUM_THREADS": "1"}
    return processes.started(cmd, lambda: processes.answers(url), env=env, cwd=cwd, timeout_s=90,
                             stop=signal.SIGTERM, stop_timeout_s=30)


def operator_kwargs(env_id: str) -> dict[str, Any]:
    """Flights-v0 tells its task only to the operator: the bench's search call is built from it."""
    return {"privileged_info": True} if env_id == FLIGHTS else {}


def agentrl_server(port: int, prefix: list[str]):  # type: ignore[no-untyped-def]
    cmd = [*prefix, sys.executable, "-m", "agentrl", "serve", "--port", str(port), "--max-episodes", "4096",
           "--env", ECHO, "--env", FLIGHTS,
           "--env-kwargs", f"{FLIGHTS}={json.dumps(operator_kwargs(FLIGHTS))}"]
    return process(cmd, f"http://127.0.0.1:{port}")


def openenv_template(workdir: Path) -> Path:
    """Generate the echo env from OpenEnv's template, allowing as many sessions as the bench opens."""
    subprocess.run(
        [sys.executable, "-m", "openenv.cli", "init", "bench_echo", "--output-dir", str(workdir)],
        check=True,
        capture_output=True,
    )
    app = workdir / "bench_echo" / "server" / "app.py"
    app.write_text(re.sub(r"max_concurrent_envs=\d+", "max_concurrent_envs=4096", app.read_text()))
    return workdir


def openenv_server(workdir: Path, port: int, prefix: list[str]):  # type: ignore[no-untyped-def]
    # the template's own entry point: uvicorn.run(app, host, port) with OpenEnv's defaults
    code = f"from bench_echo.server.app import main; main(host='127.0.0.1', port={port})"
    return process([*prefix, sys.executable, "-c", code], f"http://127.0.0.1:{port}", cwd=str(workdir))
