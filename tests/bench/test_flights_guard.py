"""bench/flights.py's guard: a hot path about twice as slow as recorded, measured against the fixed
work of the same run, fails the run; the recorded speed passes. CI's quick run of the bench
(tests/bench/test_benches.py) applies the guard to the real figures; this checks its arithmetic."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path

from rich.console import Console

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))  # the bench imports `measuring` from its own folder
_spec = importlib.util.spec_from_file_location("flights_bench", ROOT / "bench" / "flights.py")
flights = sys.modules["flights_bench"] = importlib.util.module_from_spec(_spec)
assert _spec.loader is not None
_spec.loader.exec_module(flights)


def medians(times: float, work_s: float) -> dict[str, float]:
    return {name: recorded * times * work_s for name, recorded in flights.RECORDED.items()}


def works(work_s: float) -> dict[str, float]:
    return dict.fromkeys(flights.RECORDED, work_s)


def test_the_recorded_speed_and_noise_pass_and_twice_as_slow_fails():
    console = Console(file=io.StringIO())
    work_s = 0.0006
    assert flights.guard(console, medians(1.0, work_s), works(work_s)) == []
    assert flights.guard(console, medians(1.4, work_s), works(work_s)) == []  # a loaded machine's swing
    failed = flights.guard(console, medians(2.0, work_s), works(work_s))
    assert [line.split(":")[0] for line in failed] == list(flights.RECORDED)
    assert "limit" in failed[0]
    # the ratio, not the absolute time: a machine twice as slow in both passes
    assert flights.guard(console, medians(1.0, 2 * work_s), works(2 * work_s)) == []
    # each figure against the fixed work of its own phase: a burst that slowed one phase passes, the
    # same figure against the rest of the run's fixed work fails
    name = "reset, new task in a cached world"
    burst = {**medians(1.0, work_s), name: flights.RECORDED[name] * 3 * work_s}
    assert flights.guard(console, burst, {**works(work_s), name: 3 * work_s}) == []
    assert [line.split(":")[0] for line in flights.guard(console, burst, works(work_s))] == [name]


def test_the_fixed_work_is_step_sized_and_steady():
    work = flights.FixedWork()
    times = sorted(work.run() for _ in range(60))
    median = times[len(times) // 2]
    assert 1e-5 < median < 0.05, f"the fixed work took {median * 1000:.2f} ms a pass"
    assert len(work.times) == 60
