"""`agentrl demo --trajectories` writes every episode's record; `--sft` lines come from the same records."""

from __future__ import annotations

import json

from agentrl.cli import main
from agentrl.core.trajectory import TRAJECTORY_FORMAT
from agentrl.demo import export_oracle_jsonl


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_demo_writes_records_in_process_and_over_http_alike(tmp_path, capsys):
    local, served, sft = tmp_path / "local.jsonl", tmp_path / "served.jsonl", tmp_path / "sft.jsonl"
    argv = ["demo", "--episodes", "3", "--seed", "4", "--stochastic"]
    assert main([*argv, "--in-process", "--trajectories", str(local), "--sft", str(sft)]) == 0
    assert main([*argv, "--trajectories", str(served)]) == 0
    out = capsys.readouterr().out
    assert f"wrote 6 trajectory records to {local}" in out and "wrote 3 oracle episodes" in out
    records = lines(local)
    assert [r["agent"] for r in records] == ["oracle"] * 3 + ["random"] * 3
    assert all(r["format"] == TRAJECTORY_FORMAT and r["steps"] and r["task_id"] for r in records)
    returns = [sum(s["reward"] for s in r["steps"]) for r in records]
    assert returns[:3] == [1.0] * 3 and sum(returns[3:]) < 3
    assert [r["seed"] for r in records] == [4, 5, 6] * 2
    assert any(call["name"] for r in records for step in r["steps"] for call in step["calls"])
    # the server plays the same seeds to the same records, under the same env id
    assert {r["env_id"] for r in records} == {"agentrl/Flights-v0"}
    assert lines(served) == records


def test_sft_lines_from_records_are_the_oracle_export(tmp_path):
    ours, theirs = tmp_path / "demo.jsonl", tmp_path / "export.jsonl"
    assert main(["demo", "--episodes", "4", "--seed", "9", "--stochastic", "--sft", str(ours)]) == 0
    assert export_oracle_jsonl(theirs, 4, seed=9, env_kwargs={"days": 1, "stochastic": True}) == 4
    assert ours.read_text() == theirs.read_text()
    assert all(line["task"]["family"] and line["reward"] == 1.0 for line in lines(ours))
