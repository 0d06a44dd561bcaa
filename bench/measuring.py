"""What a bench records beside its figures: the machine, its load, a core's swings, a process's CPU, RSS.

Not a benchmark itself (tests/bench runs every other `bench/*.py` in its quick mode): a figure means
little without the machine it was measured on and how busy that was, so the benches describe both
the same way from here: the CPU and its load, how much a core's speed swings over the run (a shared
virtual machine's core can run at half speed for a fraction of a second), servers pinned to one core
and clients to the others, the CPU seconds and the peak RSS of a process; and two readings of their
figures: a p99 and an aim's verdict cell. The benches import it as they import each other, with
their own folder on `sys.path`.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import resource
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def machine() -> str:
    """The CPU, its cores, the load average, Python and the kernel, in one line."""
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{cpu}; {os.cpu_count()} cores; load avg {load()}; Python {platform.python_version()}; "
        f"{platform.system()} {platform.release()}"
    )


def speed_swings(prefix: list[str], times: int = 40) -> str:
    """The same pure-Python work timed `times` times back to back on the server's core: on a shared
    virtual machine a core can run it at half speed for a fraction of a second (the host's other
    work), which shows in every figure measured meanwhile, p99 first."""
    code = (f"import time\nfor _ in range({times}):\n t = time.perf_counter(); d = {{}}\n"
            " for i in range(100000): d[i % 1000] = str(i)\n print(time.perf_counter() - t)")
    out = subprocess.run([*prefix, sys.executable, "-c", code], check=True, capture_output=True, text=True)
    ms = np.array([float(x) for x in out.stdout.split()]) * 1000
    return (f"fixed work on the server's core, {times} times: fastest {ms.min():.1f} ms, median "
            f"{np.median(ms):.1f}, slowest {ms.max():.1f} ({ms.max() / ms.min():.2f}x)")


class FixedWork:
    """The same step-shaped work every time (indexed SQLite reads of an in-memory table, a JSON text
    of a search-sized result, a blake2b of it), timed beside a bench's own figures: a figure divided by
    this one's median measured in the same minutes says how fast the code is, whatever the machine or
    its load did to both. A bench guards its hot paths with such ratios (`bench/flights.py`)."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:")
        self._db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, k INTEGER, v TEXT)")
        self._db.execute("CREATE INDEX t_k ON t (k)")
        self._db.executemany("INSERT INTO t VALUES (?, ?, ?)", ((i, i % 97, f"row {i}") for i in range(5000)))
        self.times: list[float] = []
        self.cpu_times: list[float] = []  # the thread's CPU seconds of each pass: what load barely moves

    def run(self) -> float:
        """One pass (about a Flights-v0 step's work); its seconds are kept in `times` (wall clock) and
        `cpu_times` (the thread's CPU time)."""
        start, cpu = time.perf_counter(), time.thread_time()
        rows = [self._db.execute("SELECT id, v FROM t WHERE k = ?", (k,)).fetchall() for k in range(8)]
        found = [{"id": i, "fares": {"a": {"price": i, "seats": 3}}, "rows": rows[i % 8]} for i in range(40)]
        result = {"count": len(found), "results": found}
        hashlib.blake2b(json.dumps(result, ensure_ascii=False).encode(), digest_size=16).hexdigest()
        elapsed = time.perf_counter() - start
        self.cpu_times.append(time.thread_time() - cpu)
        self.times.append(elapsed)
        return elapsed


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def pin_cores(pin: bool) -> tuple[list[str], str]:
    """Servers on the first core (`taskset`), this process and its client processes on the others,
    so that client and server never take turns on one core; no pinning with one core or no taskset."""
    cores = sorted(os.sched_getaffinity(0))
    if not pin or len(cores) < 2 or shutil.which("taskset") is None:
        return [], "not pinned"
    os.sched_setaffinity(0, cores[1:])
    return ["taskset", "-c", str(cores[0])], f"servers on core {cores[0]}, clients on {cores[1:]}"


def server_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def yes(met: bool) -> str:
    """An aim's verdict cell: met, or a red no."""
    return "yes" if met else "[red]no[/]"


def p99(xs: list[float]) -> float:
    """The 99th percentile of `xs` as one of its values (the nearest rank), not interpolated."""
    return sorted(xs)[min(len(xs) - 1, round(0.99 * (len(xs) - 1)))]


def _status_kib(pid: int | str) -> dict[str, int]:
    """The memory figures (kB) of a process's /proc status: VmRSS, VmHWM, RssAnon and the rest."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {line.split(":")[0]: int(line.split()[1]) for line in lines if line.endswith(" kB")}


def peak_rss_mib(pid: int | str = "self") -> float:
    """A process's RSS high-water mark (this one's by default). VmHWM starts afresh at exec;
    `ru_maxrss` (the fallback where /proc has no status) would carry the parent's peak over a fork."""
    if Path(f"/proc/{pid}/status").exists() and "VmHWM" in (status := _status_kib(pid)):
        return status["VmHWM"] / 1024
    if pid != "self":
        raise FileNotFoundError(f"no VmHWM for process {pid}")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def memory_kib(pid: int | str = "self", files: str = "agentrl-flights-world") -> dict[str, int]:
    """A process's RSS and what it holds, KiB. Held: its anonymous memory plus the in-memory files
    named `files` it has open, each counted once. RSS counts a shared file's page once for every
    mapping that has read it (a Flights-v0 world's pages, mapped by each of its episodes) and leaves
    out the file's pages no mapping has read, so it overstates pages that are shared."""
    status = _status_kib(pid)
    held = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if files in os.readlink(fd):
                held += fd.stat().st_blocks * 512 // 1024
        except OSError:  # a descriptor closed since the listing (the listing's own, in this process)
            continue
    return {"rss": status["VmRSS"], "held": status["RssAnon"] + held}
