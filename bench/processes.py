"""The benchmarks' servers: a command run as a child process, awaited until it answers, stopped after.

Not a benchmark itself (tests/bench runs every other `bench/*.py` in its quick mode): the benches
import it as they import each other, with their own folder on `sys.path`.
"""

from __future__ import annotations

import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx

START_TIMEOUT_S = 300.0  # a loaded two-core machine starts servers that import the envs slowly


def answers(url: str) -> bool:
    """Whether the server at `url` is up: its `/health` answers 200, or, for a cluster's discovery URL
    (`.../v1/cluster`), every holder it lists is up."""
    try:
        if url.endswith("/v1/cluster"):
            r = httpx.get(url, timeout=5)
            return r.status_code == 200 and all(h["state"] == "up" for h in r.json()["holders"])
        return httpx.get(f"{url}/health", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def started(args: list[str], ready: Callable[[], bool], *, env: dict[str, str] | None = None,
            cwd: str | None = None, timeout_s: float = START_TIMEOUT_S, stop: signal.Signals = signal.SIGINT,
            stop_timeout_s: float = 60.0) -> Iterator[subprocess.Popen[bytes]]:
    """Run `args` until `ready()` holds, yield the process, then send it `stop` (SIGKILL past
    `stop_timeout_s`). Its stderr goes to a file, not a pipe nobody reads (a server that logs would
    block once the pipe is full), and its tail is in the error when it exits or is not ready within
    `timeout_s`; it is stopped whichever way the block ends."""
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            deadline = time.monotonic() + timeout_s
            while not ready():
                if proc.poll() is not None or time.monotonic() > deadline:
                    stderr.seek(0)
                    raise RuntimeError(f"{' '.join(args[:5])} did not start: "
                                       f"{stderr.read().decode(errors='replace')[-2000:]}")
                time.sleep(0.1)
            yield proc
        finally:
            proc.send_signal(stop)
            try:
                proc.wait(timeout=stop_timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
