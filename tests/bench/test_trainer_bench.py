"""bench/trainer.py --quick: agent-train and TRL's GRPOTrainer both run the same multi-turn work.

The bench's figures are only comparable if both trainers really did the same episodes: the same
number of episodes, every one of `max_turns` generations (the starting policy calls a tool every
turn, so TRL does not stop early), and tokens trained on by both. The speed itself is the bench's
output, not asserted here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import unavailable

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_both_trainers_run_the_same_work_and_the_table_has_the_ratio(tmp_path):
    if importlib.util.find_spec("trl") is None:
        unavailable("TRL is not installed (the trl extra)")
    out = tmp_path / "trainer.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "trainer.py"), "--quick", "--json", str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "agent-train / TRL" in done.stdout and "load average" in done.stdout
    data = json.loads(out.read_text())
    work, ours, trl = data["work"], data["results"]["agent-train"], data["results"]["trl"]
    episodes = work["steps"] * work["prompts"] * work["group_size"]
    assert ours["episodes"] == trl["episodes"] == episodes
    assert ours["steps"] == trl["steps"] == work["steps"]
    assert ours["excluded"] == 0  # no transcript drifted from the chat template
    # multi-turn in both: agent-train's env answers every turn; TRL goes on while the policy calls a
    # tool, which the taught policy does nearly always (a rare mis-sampled call ends a rollout early)
    assert ours["turns"] == pytest.approx(work["max_turns"])
    assert work["max_turns"] - 0.5 <= trl["turns"] <= work["max_turns"]
    for measured in (ours, trl):
        assert measured["gen_tokens"] > 0 and measured["trained_tokens"] > 0
        assert measured["peak_rss_mib"] > 100 and measured["torch_threads"] == 1
        assert 0 < measured["rollout_s"] <= measured["wall_s"] * 2
