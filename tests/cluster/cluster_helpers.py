"""A real cluster (`agentrl serve --processes N`, or `--ray` with N actors) in a child process, and
what tests do to it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from support import free_port, unavailable

ECHO = "agentrl/Echo-v0"
FLIGHTS = "agentrl/Flights-v0"
START_TIMEOUT_S = 180.0  # a loaded two-core machine starts two servers importing the envs slowly


def answers(url: str, timeout_s: float = 1.0) -> bool:
    """Whether the server at `url` answers its health check within `timeout_s`."""
    try:
        return httpx.get(f"{url}/health", timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


# Ray on loopback only: every Ray service binds 127.0.0.1 (see Ray's single-machine switch)
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled",
           "RAY_USAGE_STATS_ENABLED": "0"}


class ServedHolders:
    """A command serving several holders behind one holder map (`self.discovery`), run as `self.proc`
    (its stderr piped): what both kinds of cluster below share."""

    discovery: str
    proc: subprocess.Popen[str]
    name = "the cluster"  # what an error calls the command
    headers: dict[str, str] = {}

    def holders(self) -> list[dict[str, Any]]:
        return httpx.get(self.discovery, timeout=10, headers=self.headers).json()["holders"]

    def wait(self, predicate, timeout_s: float = START_TIMEOUT_S, what: str = "the cluster") -> Any:
        """Poll the holder map until `predicate(holders)` is truthy; fail past `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        holders: Any = None
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"{self.name} exited: {self.proc.stderr.read()[-2000:]}"
            try:
                holders = self.holders()
            except httpx.HTTPError:
                holders = None
            if holders is not None and (got := predicate(holders)):
                return got
            time.sleep(0.1)
        raise AssertionError(f"{what} not reached in {timeout_s} s: {holders}")

    def kill_holder(self, holder: str) -> None:
        """SIGKILL every process that holds the holder's listening socket (a forked process may hold
        it too, the command itself does not count), and return once its port refuses connections, so
        the kill has landed."""
        url = next(h["url"] for h in self.holders() if h["holder"] == holder)
        kill_listener(url, keep=(self.proc.pid,))

    def stop(self) -> None:
        """End the command as Ctrl-C would (SIGKILL after a minute)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class ServedCluster(ServedHolders):
    """A cluster of `kind` "processes" or "ray" (a local Ray started by the command, actors taking
    half a CPU each so that a two-core machine holds four) on a free loopback port; `stop()` ends
    it as Ctrl-C would."""

    def __init__(self, kind: str = "processes", holders: int = 2,
                 envs: tuple[str, ...] = (ECHO, FLIGHTS), extra: tuple[str, ...] = (),
                 environ: dict[str, str] | None = None) -> None:
        self.kind = kind
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.discovery = f"{self.url}/v1/cluster"
        args = [sys.executable, "-m", "agentrl", "serve", "--processes", str(holders),
                "--port", str(self.port), "--no-ui"]
        if kind == "ray":
            args += ["--ray", "--ray-cpus", "0.5"]
        for env_id in envs:
            args += ["--env", env_id]
        args += list(extra)
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env={**(os.environ if environ is None else environ), **RAY_ENV})

    def wait_up(self, count: int) -> list[dict[str, Any]]:
        """The holders up, once `count` are and none is starting."""
        def ready(hs):
            up = [h for h in hs if h["state"] == "up"]
            return up if len(up) >= count and not any(h["state"] == "starting" for h in hs) else None
        return self.wait(ready)

    def ensure_up(self, count: int) -> list[dict[str, Any]]:
        """At least `count` holders up and answering, adding some where killed ones are gone for good
        (Ray actors are not started again); waits out a map that still calls a killed holder up."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            holders = self.holders()
            up = [h for h in holders if h["state"] == "up" and answers(h["url"], 2)]
            starting = [h for h in holders if h["state"] == "starting"]
            if len(up) >= count and not starting:
                return up
            if len(up) + len(starting) < count and all(
                h["state"] != "up" or answers(h["url"], 2) for h in holders
            ):
                r = httpx.post(f"{self.discovery}/holders", json={"n": count - len(up) - len(starting)},
                               timeout=START_TIMEOUT_S)
                assert r.status_code == 201, r.text
            time.sleep(0.2)
        raise AssertionError(f"{count} holders not up in {START_TIMEOUT_S} s: {self.holders()}")

    def children(self) -> list[int]:
        """Process ids of the cluster command's child processes."""
        path = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        return [int(pid) for pid in path.read_text().split()]

    def holder_pid(self, holder: str) -> int:
        """The process listening on the holder's port (a child process, or a Ray actor's worker)."""
        url = next(h["url"] for h in self.holders() if h["holder"] == holder)
        return pid_listening_on(int(url.rsplit(":", 1)[1]))


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def pid_listening_on(port: int) -> int:
    """The process holding the listening TCP socket on `port` (read from /proc, Linux)."""
    return pids_listening_on(port)[0]


def pids_listening_on(port: int) -> list[int]:
    """Every process holding the listening TCP socket on `port` (read from /proc, Linux)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{fields[9]}]")
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in inodes for fd in (entry / "fd").iterdir()):
                pids.append(int(entry.name))
        except OSError:  # another user's process, or one that just ended
            continue
    if not pids:
        raise AssertionError(f"no process listens on port {port}")
    return pids


def need_ray() -> None:
    """Skip where Ray (the [cluster] extra) is not installed; fail under CI."""
    try:
        import ray  # noqa: F401
    except ImportError:
        unavailable("ray is not installed (pip install agentrl-gym[cluster])")


def check_rolled(served: ServedHolders, before: set[str], code: int, out: str, load_field: str) -> None:
    """The end of a roll of the holders `before`: it exited 0 having said each drain (with the
    holder's load under `load_field`), each of them is `down` holding nothing, as many new ones `up`."""
    assert code == 0, out
    said = load_field.replace("_", " ") + " at the drain"
    assert sum(said in line for line in out.splitlines()) == len(before), out
    holders = served.holders()
    states = {h["holder"]: h["state"] for h in holders}
    assert {states[name] for name in before} == {"down"}, states
    assert all(h[load_field] == 0 for h in holders if h["holder"] in before), holders
    assert sorted(s for n, s in states.items() if n not in before) == ["up"] * len(before), states


def latencies(ms: list[float]) -> str:
    """The median and p99 of latencies in milliseconds, as a test prints them."""
    ms = sorted(ms)
    return f"p50 {ms[len(ms) // 2]:.1f} ms, p99 {ms[int(0.99 * (len(ms) - 1))]:.1f} ms"


def need_docker() -> None:
    """Skip where no Docker engine or sandbox image is at hand; fail under CI."""
    from agentrl.sandbox_server import DockerBackend, DockerUnavailable

    try:
        DockerBackend(pool_size=0).close()
    except DockerUnavailable as exc:
        unavailable(str(exc).splitlines()[0])


class ServedSandboxes(ServedHolders):
    """`agentrl sandbox serve --processes N` in a child process on a free loopback port."""

    name = "the sandbox servers"

    def __init__(self, processes: int = 2, pool_size: int = 1, token: str | None = None,
                 extra: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.discovery = f"{self.url}/v1/cluster"
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        env = {k: v for k, v in os.environ.items() if k != "AGENTRL_SANDBOX_TOKEN"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentrl", "sandbox", "serve", "--processes", str(processes),
             "--port", str(self.port), "--pool-size", str(pool_size), *(["--token", token] if token else []),
             *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)

    def wait_up(self, count: int, timeout_s: float = START_TIMEOUT_S) -> list[dict[str, Any]]:
        return self.wait(lambda hs: hs if hs and sum(h["state"] == "up" for h in hs) >= count else None,
                         timeout_s, f"{count} sandbox servers up")


def kill_listener(url: str, keep: tuple[int, ...] = ()) -> None:
    """SIGKILL every process listening on `url`'s port (but `keep` and this one); returns once the
    port refuses connections."""
    port = int(url.rsplit(":", 1)[1])
    for pid in pids_listening_on(port):
        if pid not in (*keep, os.getpid()):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return
        time.sleep(0.01)
    raise AssertionError(f"{url} still accepts connections 10 s after SIGKILL")
