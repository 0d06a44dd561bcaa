"""A GRPO step in passes of bounded tokens computes what one pass over the whole step computes.

`TrainConfig.pass_tokens` and `checkpoint_activations` bound a step's memory (each pass is cut to
its own longest sequence; its layers keep only their inputs for backward), not what the step
computes: the accumulated loss, gradients and stats must equal those of a single pass without
checkpointing, for every aggregation and path of `update.optimize`.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest
import torch
from test_train_update import make_batch, tiny_llama

from agentrl.agent_train.config import TrainConfig
from agentrl.agent_train.update import optimize, token_passes

# make_batch's lengths are 40, 33, 27, 40, 21: with 70 tokens a pass, rows 1 and 2 share a pass cut
# to 33 columns and every other row is a pass of its own
BOUNDED = 70
Step = tuple[dict[str, float], list[torch.Tensor], list[tuple[int, int, bool]]]  # stats, grads, passes


def one_step(model: Any, cfg: TrainConfig, batch: dict[str, torch.Tensor], with_ref: bool = False,
             ) -> Step:
    """`optimize` on a copy of `model` with SGD at learning rate 0 (the gradients stay to be read);
    returns the stats, the gradients and, per forward of the model's body: rows, width, and whether
    its layers were checkpointing."""
    policy = copy.deepcopy(model)
    ref = None
    if with_ref:
        ref = copy.deepcopy(model).eval().requires_grad_(False)
        with torch.no_grad():  # a reference that differs from the policy, so the KL term is not 0
            for p in ref.parameters():
                p.add_(0.05 * torch.randn_like(p, generator=torch.Generator().manual_seed(3)))
    seen: list[tuple[int, int, bool]] = []

    def record(module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        checkpointing = any(getattr(m, "gradient_checkpointing", False) for m in policy.modules())
        seen.append((*kwargs["input_ids"].shape, checkpointing))

    policy.base_model.register_forward_pre_hook(record, with_kwargs=True)
    stats = optimize(policy, ref, torch.optim.SGD(policy.parameters(), lr=0.0), batch, cfg, False, [])
    assert not any(getattr(m, "gradient_checkpointing", False) for m in policy.modules()), "left on"
    return stats, [p.grad.clone() for p in policy.parameters()], seen


def assert_same(a: Step, b: Step) -> None:
    assert a[0].keys() == b[0].keys()
    for key in a[0]:
        assert b[0][key] == pytest.approx(a[0][key], rel=1e-5, abs=1e-7), key
    assert len(a[1]) == len(b[1]) > 0
    for ga, gb in zip(a[1], b[1], strict=True):
        assert torch.allclose(ga, gb, rtol=1e-5, atol=1e-7)
    assert any(g.abs().sum() > 0 for g in a[1]), "a step with no gradient shows nothing"


def test_token_passes_bound_each_pass_and_keep_the_order():
    lengths = [40, 33, 27, 40, 21, 5, 5, 5, 90]
    for budget, max_rows in [(70, 0), (80, 2), (10, 0), (10_000, 3)]:
        passes = token_passes(lengths, budget, max_rows)
        assert [i for s in passes for i in range(s.start, s.stop)] == list(range(len(lengths)))
        for s in passes:
            rows = s.stop - s.start
            assert rows == 1 or rows * max(lengths[s]) <= budget
            assert not max_rows or rows <= max_rows
    assert token_passes(lengths, 70) == [slice(0, 1), slice(1, 3), slice(3, 4), slice(4, 7), slice(7, 8),
                                         slice(8, 9)]
    assert token_passes([], 70) == []


@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean", "constant"])
def test_bounded_passes_with_checkpointing_equal_one_pass(aggregation):
    model = tiny_llama()
    batch = make_batch(model, per_token_adv=aggregation == "seq-mean")  # per-token advantages are cut too
    whole = TrainConfig(aggregation=aggregation, micro_batch=5, pass_tokens=10**6,
                        checkpoint_activations=False, temperature=0.8, max_new_tokens=16, is_cap=1.5)
    single = one_step(model, whole, batch)
    bounded = one_step(model, replace(whole, pass_tokens=BOUNDED, checkpoint_activations=True), batch)
    assert_same(single, bounded)
    assert single[2] == [(5, 40, False)]
    assert bounded[2] == [(1, 40, True), (2, 33, True), (1, 40, True), (1, 21, True)]


def test_the_two_pass_path_with_a_reference_equals_one_pass():
    """Several epochs: the old and reference logprobs come from no-grad passes, put back together
    from bounded passes of their own."""
    model = tiny_llama(kv_heads=2)
    batch = make_batch(model, seed=4)
    whole = TrainConfig(micro_batch=5, pass_tokens=10**6, checkpoint_activations=False, epochs_per_step=2,
                        kl_coef=0.1, temperature=0.8, max_new_tokens=16, is_cap=1.5)
    single = one_step(model, whole, batch, with_ref=True)
    bounded = one_step(model, replace(whole, pass_tokens=BOUNDED, micro_batch=1), batch, with_ref=True)
    assert_same(single, bounded)
    # per epoch: the policy's old logprobs, then the loss passes (the reference is another model)
    assert [rows for rows, _, _ in bounded[2]] == [1] * 5 * 3
