"""A real `agentrl serve --processes N` in a child process, and what tests do to it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from support import free_port

ECHO = "agentrl/Echo-v0"
FLIGHTS = "agentrl/Flights-v0"
START_TIMEOUT_S = 180.0  # a loaded two-core machine starts two servers importing the envs slowly


class ProcessCluster:
    """`agentrl serve --processes N` on a free loopback port; `stop()` ends it as Ctrl-C would."""

    def __init__(self, processes: int = 2, envs: tuple[str, ...] = (ECHO, FLIGHTS), *extra: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.discovery = f"{self.url}/v1/cluster"
        args = [sys.executable, "-m", "agentrl", "serve", "--processes", str(processes),
                "--port", str(self.port), "--no-ui", *extra]
        for env_id in envs:
            args += ["--env", env_id]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def holders(self) -> list[dict[str, Any]]:
        return httpx.get(self.discovery, timeout=10).json()["holders"]

    def wait(self, predicate, timeout_s: float = START_TIMEOUT_S, what: str = "the cluster") -> Any:
        """Poll the holder map until `predicate(holders)` is truthy; fail past `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the cluster exited: {self.proc.stderr.read()[-2000:]}"
            try:
                holders = self.holders()
            except httpx.HTTPError:
                holders = None
            if holders is not None and (got := predicate(holders)):
                return got
            time.sleep(0.1)
        raise AssertionError(f"{what} not reached in {timeout_s} s: {holders}")

    def wait_up(self, count: int | None = None) -> list[dict[str, Any]]:
        return self.wait(lambda hs: hs if hs and all(h["state"] == "up" for h in hs)
                         and (count is None or len(hs) == count) else None)

    def children(self) -> list[int]:
        """Process ids of the holders (the cluster's child processes)."""
        path = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        return [int(pid) for pid in path.read_text().split()]

    def holder_pid(self, holder: str) -> int:
        for pid in self.children():
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if holder.encode() in f.read().split(b"\0"):
                    return pid
        raise AssertionError(f"no process of holder {holder}")

    def kill_holder(self, holder: str) -> None:
        os.kill(self.holder_pid(holder), signal.SIGKILL)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False
