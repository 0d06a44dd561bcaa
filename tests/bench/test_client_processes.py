"""bench/client_processes.py: clients in processes of their own open and close one window together,
their figures come back, each side's CPU is read from the right processes, and a client that fails
fails the run with its own error, leaving no client behind."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1].parent
sys.path.insert(0, str(ROOT / "bench"))  # the benches import their helpers from their own folder
import client_processes  # noqa: E402

SPIN_S = 0.3  # of CPU each client spends in the window, however loaded the machine


async def spin(cpu_s: float, fail: str, gate: client_processes.Gate) -> dict[str, Any]:
    """A client that spends `cpu_s` of CPU in the window, or fails where `fail` says."""
    if fail == "set-up":
        raise ValueError("the set-up failed")
    gate.opened()
    spins, end = 0, time.process_time() + cpu_s
    while time.process_time() < end:
        spins += 1
    if fail == "window":
        raise ValueError("a step failed in the window")
    gate.closed()
    return {"spins": spins}


@pytest.fixture
def servers():
    """A busy process and an idle one, standing for servers whose CPU is read."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield busy.pid, idle.pid
    for proc in (busy, idle):
        proc.kill()
        proc.wait()


def test_the_window_is_shared_and_each_sides_cpu_read(servers):
    busy, idle = servers
    window = client_processes.run(spin, [(SPIN_S, ""), (SPIN_S, "")], [busy, idle], timeout_s=120)
    assert len(window.results) == 2 and all(r["spins"] > 0 for r in window.results)
    assert window.wall_s >= SPIN_S
    assert window.server_cpu_s[0] > window.server_cpu_s[1] and window.server_cpu_s[1] < 0.02, window
    assert all(SPIN_S - 0.05 < cpu < SPIN_S + 0.1 for cpu in window.client_cpu_s), window
    assert window.client_busy() == pytest.approx(sum(window.client_cpu_s) / window.wall_s)
    assert window.busy_cells()[0].endswith(" + 0%")
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize("fail", ["set-up", "window"])
def test_a_failed_client_fails_the_run_with_its_error(servers, fail):
    with pytest.raises(RuntimeError, match="a client process failed") as raised:
        client_processes.run(spin, [(SPIN_S, ""), (SPIN_S, fail)], list(servers), timeout_s=120)
    assert "ValueError" in str(raised.value)
    assert multiprocessing.active_children() == []


def test_work_is_split_whole_and_never_empty():
    assert client_processes.split(5, 2) == [(0, 3), (3, 2)]
    assert client_processes.split(1, 4) == [(0, 1)]
    assert sum(n for _, n in client_processes.split(512, 3)) == 512
