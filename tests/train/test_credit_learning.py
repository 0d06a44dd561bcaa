"""Step-level credit still learns from the reward and from nothing else: in `anchor` and `branch`
mode the PickWord run of test_train_learning.py raises held-out success, and its negative control
(each step's rewards permuted across its episodes, forks included) does not. `episode` mode is
test_train_learning.py's own pair of tests.

PickWord has no `state_hash`: anchor mode groups its steps by the observations so far (the reset
prompt, then the retry prompt). Its env forks by copying (toy_env.py)."""

from __future__ import annotations

import pytest
from test_train_learning import rose_significantly, toy_config

from agentrl.agent_train.models import build_tiny_model
from agentrl.agent_train.train import train

MODES = ["anchor", "branch"]


def run(tmp_path, toy_tokenizer, mode: str, shuffle: bool) -> tuple[float, float, float, list[dict]]:
    cfg = toy_config(tmp_path, group_size=16, credit=mode, shuffle_rewards=shuffle, credit_branches=2)
    policy = build_tiny_model(toy_tokenizer, hidden=64, layers=2, seed=0)
    result = train(cfg, policy=policy, tokenizer=toy_tokenizer, log=lambda *_: None)
    before, after = result["eval_before"]["eval_success"], result["eval_after"]["eval_success"]
    _, z = rose_significantly(before, after, cfg.eval_seeds * cfg.eval_k)
    return before, after, z, result["metrics"]


@pytest.mark.parametrize("mode", MODES)
def test_held_out_success_rises_in_every_mode(tmp_path, toy_tokenizer, mode):
    before, after, z, rows = run(tmp_path, toy_tokenizer, mode, shuffle=False)
    assert rose_significantly(before, after, 64 * 4)[0], f"{mode}: {before:.3f} -> {after:.3f} (z={z:.2f})"
    level = f"zero_var_groups_{mode}"
    assert all(level in r and "trainable_frac" in r for r in rows if "loss" in r)


@pytest.mark.parametrize("mode", MODES)
def test_the_negative_control_does_not_improve_in_every_mode(tmp_path, toy_tokenizer, mode):
    before, after, z, rows = run(tmp_path, toy_tokenizer, mode, shuffle=True)
    rose, _ = rose_significantly(before, after, 64 * 4)
    assert not rose and z < 3.0, f"{mode}: {before:.3f} -> {after:.3f} (z={z:.2f})"
    assert any(r.get("trained_samples", 0) > 0 for r in rows)  # it trained, on rewards without information
