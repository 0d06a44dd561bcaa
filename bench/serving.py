"""The server benches' shared parts: the servers they start and the actions they step them with.

Not a benchmark itself (tests/bench runs every other `bench/*.py` in its quick mode): `bench/server.py`
(steps) and `bench/episodes.py` (whole episodes) measure the same two servers, so what starts them
lives here once: `agentrl serve` with Echo-v0 and Flights-v0, the echo env generated from OpenEnv's
template behind OpenEnv's `create_app`, each run until it answers and stopped after, and the tool
call each env is stepped with. The cluster benches (`cluster.py`, `replay.py`, `chaos.py`,
`capacity.py`) share one server or a cluster of two started the same way (`served`), the holders of
its map (`holders`) and the process behind each, to read or to SIGKILL (`holder_pid`). The benches
import it as they import each other, with their own folder on `sys.path`. Everything talks over
loopback only.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import httpx

from agentrl.serving.children import free_port

sys.path.insert(0, str(Path(__file__).resolve().parent))
import processes  # bench/processes.py: servers started, awaited and stopped

from agentrl.core import tool_call as call

ECHO, FLIGHTS = "agentrl/Echo-v0", "agentrl/Flights-v0"
OPENENV = "OpenEnv echo"
SERVER_PROCESSES = 2  # of a cluster that `served` starts (`--processes 2`, two Ray actors)
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled",
           "RAY_USAGE_STATS_ENABLED": "0"}


# --- the actions ---------------------------------------------------------------------------------
def action_for(env_id: str, info: dict[str, Any]) -> str:
    """A real tool call: Echo echoes; Flights runs a search query against the episode's database."""
    if env_id == FLIGHTS:
        task = info["task"]["request"]
        return call(
            "search_flights", origin=task["origin"], destination=task["destination"], date=task["date"]
        )
    return call("echo", text="hello")


def action(env_id: str, i: int) -> str:
    """Step `i`'s tool call in the cluster benches, built without the episode's info: Echo echoes the
    step, Flights searches one route on a date that changes with `i`."""
    if env_id == ECHO:
        return f'<tool_call>{{"name": "echo", "arguments": {{"text": "step {i}"}}}}</tool_call>'
    return ('<tool_call>{"name": "search_flights", "arguments": {"origin": "JFK", "destination": "LAX", '
            f'"date": "2025-03-{i % 28 + 1:02d}"}}}}</tool_call>')


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


# --- a cluster's holders -------------------------------------------------------------------------
@contextmanager
def served(kind: str, envs: tuple[str, ...], extra: tuple[str, ...] = ()) -> Iterator[str]:
    """A server (`single`), a cluster of two processes (`processes`) or of two Ray actors (`ray`) on a
    free loopback port, given `extra` arguments too; yields the URL a client is given."""
    port = free_port()
    args = [sys.executable, "-m", "agentrl", "serve", "--port", str(port), "--no-ui",
            "--max-episodes", "2048", "--idle-ttl", "7200"]
    if kind != "single":
        args += ["--processes", str(SERVER_PROCESSES)]
    if kind == "ray":
        args += ["--ray"]
    for env_id in envs:
        args += ["--env", env_id]
    args += list(extra)
    base = f"http://127.0.0.1:{port}"
    url = base if kind == "single" else f"{base}/v1/cluster"
    with processes.started(args, lambda: processes.answers(url), env={**os.environ, **RAY_ENV}):
        yield url


def holders(url: str) -> list[tuple[str, str]]:
    """(name, URL) of each holder: the cluster's, or the one server itself."""
    if not url.endswith("/v1/cluster"):
        return [("server", url)]
    return [(h["holder"], h["url"]) for h in httpx.get(url, timeout=10).json()["holders"]]


def holder_pid(url: str) -> int:
    """The process listening on the loopback port of `url` (a holder, or any server), found in /proc:
    a holder may be a supervisor's child or a Ray actor, whose pid no map tells."""
    port = int(url.rsplit(":", 1)[1])
    sockets = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                sockets.add(f"socket:[{f[9]}]")
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if any(os.readlink(fd) in sockets for fd in (entry / "fd").iterdir()):
                    return int(entry.name)
            except OSError:
                continue
    raise RuntimeError(f"no process listens on {port}")
