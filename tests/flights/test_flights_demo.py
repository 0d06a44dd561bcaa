"""The demo command plays oracle and random agents and reports success rates."""

from agentrl.cli import main


def test_demo_command_plays_over_http(capsys):
    assert main(["demo", "--episodes", "8", "--seed", "2"]) == 0
    out = capsys.readouterr().out
    assert "server listening on http://127.0.0.1:" in out
    assert "Success rate" in out and "oracle" in out and "turn 1" in out


def test_demo_command_runs_in_process(capsys):
    assert main(["demo", "--episodes", "4", "--in-process"]) == 0
    out = capsys.readouterr().out
    assert "server listening" not in out and "Success rate" in out


def test_demo_writes_sft_jsonl(tmp_path, capsys):
    path = tmp_path / "sft.jsonl"
    assert main(["demo", "--episodes", "3", "--stochastic", "--sft", str(path)]) == 0
    assert len(path.read_text().splitlines()) == 3
    assert "wrote 3 oracle episodes" in capsys.readouterr().out
