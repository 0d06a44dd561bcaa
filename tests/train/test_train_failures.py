"""Failures are loud: a run whose episodes fail, or that trains on nothing, stops with the cause."""

from __future__ import annotations

import copy

import pytest
from support import free_port
from train_scripted import ScriptedBackend

from agentrl.agent_train.accounting import TrainingAborted
from agentrl.agent_train.backends import Generation
from agentrl.agent_train.cli import main
from agentrl.agent_train.config import TrainConfig
from agentrl.agent_train.train import train

TOY = "agentrl-test/PickWord-v0"


class BrokenBackend(ScriptedBackend):
    """A generator whose every call raises, like a crashed inference server."""

    async def generate(
        self, prompt_ids: list[int], max_new_tokens: int, seed: int | None = None
    ) -> Generation:
        raise RuntimeError("inference server is gone")


def config(tmp_path, **overrides) -> TrainConfig:
    base = dict(
        env=TOY,
        model="tiny:1x32",
        steps=4,
        groups_per_step=2,
        group_size=4,
        max_new_tokens=4,
        token_budget=64,
        eval_seeds=0,
        out_dir=str(tmp_path / "run"),
        tensorboard=False,
        progress=False,
        plot=False,
    )
    return TrainConfig(**{**base, **overrides})


def test_a_failing_generator_stops_the_run_with_its_error(tmp_path, toy_model, toy_tokenizer):
    logged: list[str] = []
    with pytest.raises(TrainingAborted, match=r"8 of 8 episodes excluded.*inference server is gone"):
        train(
            config(tmp_path),
            policy=toy_model,
            tokenizer=toy_tokenizer,
            backend=BrokenBackend(toy_tokenizer, []),
            log=logged.append,
        )
    # a sample traceback names where it was raised
    assert any("Traceback" in line and "inference server is gone" in line for line in logged)
    assert not (tmp_path / "run" / "checkpoint-4").exists()


def test_the_command_exits_non_zero_naming_the_cause_when_the_env_server_is_down(tmp_path, capsys):
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    argv = ["--env", "agentrl/Echo-v0", "--env-url", down, "--model", "tiny:1x32", "--steps", "2"]
    argv += ["--groups-per-step", "1", "--group-size", "2", "--eval-seeds", "0", "--no-progress"]
    argv += ["--no-tensorboard", "--no-plot", "--out-dir", str(tmp_path / "run")]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "agent-train: stopped: step 0: 2 of 2 episodes excluded" in err and "Connect" in err


def test_steps_with_nothing_to_train_on_warn_then_stop(tmp_path, toy_model, toy_tokenizer):
    # every answer is wrong: every group has equal rewards, so no step has a trainable sample
    backend = ScriptedBackend(toy_tokenizer, ["purple"] * 200)
    logged: list[str] = []
    with pytest.raises(TrainingAborted, match="3 steps in a row had no trainable sample"):
        train(
            config(tmp_path, max_idle_steps=3, steps=6),
            policy=toy_model,
            tokenizer=toy_tokenizer,
            backend=backend,
            log=logged.append,
        )
    warnings = [line for line in logged if line.startswith("warning: step")]
    assert len(warnings) == 3 and "100% of groups with equal rewards" in warnings[0]


def test_a_template_that_drifts_every_episode_stops_the_run(tmp_path, smollm2_tokenizer):
    from agentrl.agent_train.models import build_tiny_model

    # a chat template that trims content: what the model said no longer renders as it was sampled
    trimming = copy.deepcopy(smollm2_tokenizer)
    trimming.chat_template = trimming.chat_template.replace(
        "message['content']", "(message['content'] | trim)"
    )
    policy = build_tiny_model(trimming, hidden=32, layers=1)
    call = '<tool_call>{"name": "echo", "arguments": {"text": "a"}}</tool_call>'
    backend = ScriptedBackend(trimming, ["   " + call] * 50)
    with pytest.raises(TrainingAborted, match="drifted"):
        train(
            config(tmp_path, env="agentrl/Echo-v0", token_budget=4096, max_new_tokens=64),
            policy=policy,
            tokenizer=trimming,
            backend=backend,
            log=lambda *_: None,
        )


def test_a_wall_budget_stops_after_the_step_that_spent_it_and_keeps_the_last_eval(
    tmp_path, toy_model, toy_tokenizer
):
    """`max_wall_s`: a job with a time limit stops between steps, not inside one, and still gets
    its held-out evaluation and a checkpoint named by the steps it took."""
    logged: list[str] = []
    result = train(
        config(tmp_path, steps=50, max_wall_s=1e-6, eval_seeds=4, eval_k=1, max_idle_steps=0),
        policy=toy_model,
        tokenizer=toy_tokenizer,
        log=logged.append,
    )
    assert result["steps"] == 1 and len([r for r in result["metrics"] if "reward_mean" in r]) == 1
    assert "eval_success" in result["eval_after"]
    assert result["checkpoint"].endswith("checkpoint-1")
    assert any("1 of 50 steps" in line and "--max-wall-s" in line for line in logged)
