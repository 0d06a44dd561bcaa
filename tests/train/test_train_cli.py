"""The `agent-train` command end to end: YAML config + flags, outputs, checkpoint and resume."""

from __future__ import annotations

import csv
import json

import pytest
import yaml

from agentrl.agent_train.cli import config_from_args, main


def test_flags_override_yaml_and_unknown_keys_are_refused(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"env": "agentrl/Echo-v0", "group_size": 4, "lr": 0.5}))
    cfg = config_from_args(["--config", str(path), "--group-size", "8", "--no-tensorboard"])
    assert (cfg.env, cfg.group_size, cfg.lr, cfg.tensorboard) == ("agentrl/Echo-v0", 8, 0.5, False)
    path.write_text(yaml.safe_dump({"group_sise": 4}))
    with pytest.raises(ValueError, match="group_sise"):
        config_from_args(["--config", str(path)])
    path.write_text(yaml.safe_dump({"aggregation": "mean-ish"}))
    with pytest.raises(ValueError, match="aggregation"):
        config_from_args(["--config", str(path)])


def test_train_then_resume_from_the_safetensors_checkpoint(tmp_path, capsys):
    out = tmp_path / "run"
    config = tmp_path / "toy.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "env": "agentrl-test/PickWord-v0",
                "model": "tiny:2x64",
                "groups_per_step": 2,
                "group_size": 4,
                "max_new_tokens": 6,
                "token_budget": 128,
                "lr": 1e-3,
                "eval_seeds": 4,
                "eval_k": 2,
                "progress": False,
                "out_dir": str(out),
                "micro_batch": 3,
            }
        )
    )
    assert main(["--config", str(config), "--steps", "2", "--save-every", "1"]) == 0
    assert '"checkpoint"' in capsys.readouterr().out
    assert (out / "checkpoint-1" / "model.safetensors").exists()
    assert (out / "checkpoint-2" / "optimizer.pt").exists()
    assert (out / "curves.png").exists() and any((out / "tb").iterdir())
    assert (
        main(
            [
                "--config",
                str(config),
                "--steps",
                "3",
                "--resume",
                str(out / "checkpoint-2"),
                "--eval-seeds",
                "0",
            ]
        )
        == 0
    )
    state = json.loads((out / "checkpoint-3" / "trainer_state.json").read_text())
    assert state["step"] == 3
    with (out / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    steps = [int(r["step"]) for r in rows]
    assert steps == [0, 1, 2, 3]  # resumed rows appended after the first run's, none lost
    assert all(r["reward_mean"] != "" for r in rows[1:])


def test_trains_on_a_real_tool_env_in_process(tmp_path):
    assert (
        main(
            [
                "--env",
                "agentrl/Echo-v0",
                "--model",
                "tiny:1x32",
                "--steps",
                "1",
                "--groups-per-step",
                "2",
                "--group-size",
                "2",
                "--max-new-tokens",
                "8",
                "--eval-seeds",
                "0",
                "--no-progress",
                "--no-tensorboard",
                "--no-plot",
                "--out-dir",
                str(tmp_path / "echo"),
            ]
        )
        == 0
    )
    with (tmp_path / "echo" / "metrics.csv").open() as f:
        row = list(csv.DictReader(f))[-1]
    assert float(row["masked_frac"]) > 0.5 and float(row["drift"]) == 0 and float(row["turns_mean"]) >= 1


def test_one_grpo_step_on_flights(tmp_path):
    out = tmp_path / "flights"
    assert (
        main(
            [
                "--env",
                "agentrl/Flights-v0",
                "--env-kwargs",
                '{"max_turns": 2}',
                "--model",
                "tiny:1x32",
                "--steps",
                "1",
                "--groups-per-step",
                "1",
                "--group-size",
                "2",
                "--max-new-tokens",
                "8",
                "--token-budget",
                "8192",
                "--eval-seeds",
                "1",
                "--eval-k",
                "2",
                "--no-progress",
                "--no-tensorboard",
                "--no-plot",
                "--out-dir",
                str(out),
            ]
        )
        == 0
    )
    with (out / "metrics.csv").open() as f:
        row = [r for r in csv.DictReader(f) if r["reward_mean"]][-1]
    assert float(row["turns_mean"]) == 2 and float(row["drift"]) == 0 and float(row["excluded"]) == 0
    assert float(row["masked_frac"]) > 0.9  # the env's long observations are never trained on


def test_resuming_keeps_the_kl_anchor_on_the_model_the_run_started_from(tmp_path):
    import torch

    from agentrl.agent_train.config import TrainConfig
    from agentrl.agent_train.models import load_model
    from agentrl.agent_train.train import reference_model

    toy = "agentrl-test/PickWord-v0"
    trained, _ = load_model("tiny:1x32", toy)
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(0.5)  # stands for the checkpoint's trained weights
    start, _ = load_model("tiny:1x32", toy)
    resumed = TrainConfig(env=toy, model="tiny:1x32", resume=str(tmp_path), kl_coef=0.1)
    ref = reference_model(resumed, trained, "cpu")
    assert all(
        torch.equal(a, b) for a, b in zip(ref.state_dict().values(), start.state_dict().values(), strict=True)
    )
    fresh = reference_model(TrainConfig(env=toy, model="tiny:1x32", kl_coef=0.1), trained, "cpu")
    assert all(
        torch.equal(a, b)
        for a, b in zip(fresh.state_dict().values(), trained.state_dict().values(), strict=True)
    )
    assert reference_model(TrainConfig(env=toy, kl_coef=0.0), trained, "cpu") is None


def test_eval_scores_what_a_run_scores_before_its_first_step(tmp_path, capsys):
    """`agent-train eval` is the GRPO run's own held-out evaluation without the training: same
    split, seeds and sampling seeds, so its scores equal the run's `eval_before`."""
    config = tmp_path / "toy.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "env": "agentrl-test/PickWord-v0",
                "model": "tiny:2x64",
                "groups_per_step": 1,
                "group_size": 2,
                "max_new_tokens": 6,
                "token_budget": 128,
                "eval_seeds": 6,
                "eval_k": 2,
                "progress": False,
                "tensorboard": False,
                "plot": False,
                "out_dir": str(tmp_path / "run"),
            }
        )
    )
    assert main(["--config", str(config), "--steps", "1"]) == 0
    before = last_json(capsys.readouterr().out)["eval_before"]
    assert main(["eval", "--config", str(config)]) == 0
    scored = last_json(capsys.readouterr().out)
    assert scored["eval_episodes"] == 12 and scored["eval_tasks"] == 0  # PickWord names no tasks
    for key in ("eval_success", "eval_reward", "eval_pass_at_k", "eval_episodes"):
        assert scored[key] == before[key], key
    assert main(["eval", "--config", str(config), "--eval-seeds", "0"]) == 2
    assert "--eval-seeds" in capsys.readouterr().err


def last_json(out: str) -> dict:
    """The summary a command prints last, after its log lines."""
    return json.loads(out[out.rindex("\n{") + 1:] if "\n{" in out else out)
