"""GRPO must learn: a tiny random-init model's held-out success rises on PickWord, or this fails."""

from __future__ import annotations

import math

from agentrl.agent_train.config import TrainConfig
from agentrl.agent_train.train import train


def test_held_out_success_rises_significantly(tmp_path, toy_model, toy_tokenizer):
    cfg = TrainConfig(
        env="agentrl-test/PickWord-v0",
        model="tiny:2x64",
        seed=1,
        steps=40,
        groups_per_step=8,
        group_size=8,
        max_new_tokens=6,
        token_budget=128,
        lr=1e-2,
        out_dir=str(tmp_path / "run"),
        eval_seeds=64,
        eval_k=4,
        tensorboard=False,
        progress=False,
        plot=True,
    )
    result = train(cfg, policy=toy_model, tokenizer=toy_tokenizer)
    before, after = result["eval_before"]["eval_success"], result["eval_after"]["eval_success"]
    n = cfg.eval_seeds * cfg.eval_k
    pooled = (before + after) / 2
    z = (after - before) / math.sqrt(max(pooled * (1 - pooled), 1e-9) * 2 / n)
    assert after >= before + 0.08 and z >= 3.0, f"success {before:.3f} -> {after:.3f} (z={z:.2f})"
    # the run's products: per-step metrics, the curves, a safetensors checkpoint
    rows = result["metrics"]
    assert {
        "reward_mean",
        "success_rate",
        "group_reward_var",
        "masked_frac",
        "gen_tokens_per_s",
        "staleness_mean",
        "loss",
    } <= set(rows[1])
    assert all(r["drift"] == 0 for r in rows if "drift" in r)
    assert max(r.get("staleness_mean", 0) for r in rows) <= cfg.max_staleness
    assert (tmp_path / "run" / "curves.png").stat().st_size > 1000
    assert (tmp_path / "run" / "checkpoint-40" / "model.safetensors").exists()
