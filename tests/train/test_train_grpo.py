"""Known answers of the GRPO objective: advantages, clipping, aggregation, KL, and zero gradients."""

from __future__ import annotations

import math

import pytest
import torch

from agentrl.agent_train.evaluate import pass_at_k
from agentrl.agent_train.grpo import group_advantages, grpo_loss, step_loss, token_logprobs


def leaf(values):
    return torch.tensor(values, dtype=torch.float64, requires_grad=True)


def test_std_advantages_are_z_scores_per_group():
    adv, keep = group_advantages(torch.tensor([[1.0, 0.0, 1.0, 0.0], [3.0, 1.0, 2.0, 2.0]]), "std")
    assert torch.allclose(adv[0], torch.tensor([1.0, -1.0, 1.0, -1.0]))
    std = math.sqrt(0.5)
    assert torch.allclose(adv[1], torch.tensor([1 / std, -1 / std, 0.0, 0.0]))
    assert keep.all()


def test_mean_only_advantages_do_not_divide():
    adv, _ = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0]]), "mean")
    assert torch.allclose(adv, torch.tensor([[0.75, -0.25, -0.25, -0.25]]))


@pytest.mark.parametrize("mode", ["std", "mean"])
def test_zero_variance_group_gets_zero_advantage_never_nan(mode):
    adv, keep = group_advantages(torch.tensor([[1.0, 1.0, 1.0], [0.0, 1.0, 0.0]]), mode, zero_variance="skip")
    assert torch.equal(adv[0], torch.zeros(3)) and torch.isfinite(adv).all()
    assert keep.tolist() == [[False] * 3, [True] * 3]
    _, keep_all = group_advantages(torch.tensor([[1.0, 1.0, 1.0]]), mode, zero_variance="keep")
    assert keep_all.all()


def test_masked_positions_get_exactly_zero_gradient_even_with_junk_values():
    logp = leaf([[-1.0, -2.0, float("-inf"), -0.5], [-0.3, float("nan"), -1.2, -4.0]])
    old = torch.tensor([[-1.1, -2.0, -3.0, -0.4], [-0.3, -0.1, -1.0, 5.0]], dtype=torch.float64)
    ref = torch.tensor([[-1.0, -1.0, -1.0, -1.0], [-1.0, -1.0, -1.0, -1.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0, 1], [1, 0, 1, 0]])
    for aggregation in ("seq-mean", "token-mean", "constant"):
        logp.grad = None
        loss, _ = grpo_loss(
            logp,
            old,
            torch.tensor([0.7, -1.3], dtype=torch.float64),
            mask,
            aggregation=aggregation,
            normaliser=8.0,
            ref_logp=ref,
            kl_coef=0.1,
        )
        loss.backward()
        assert torch.isfinite(loss)
        assert (logp.grad[mask == 0] == 0).all(), aggregation
        assert (logp.grad[mask == 1] != 0).all(), aggregation


def test_on_policy_gradient_is_minus_advantage_over_token_count():
    logp = leaf([[-1.0, -2.0, -0.5], [-0.3, -0.7, -1.2]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    loss, stats = grpo_loss(
        logp,
        logp.detach().clone(),
        torch.tensor([2.0, -1.0], dtype=torch.float64),
        mask,
        aggregation="token-mean",
    )
    loss.backward()
    # ratio = 1, so loss = -mean(adv over the 5 trained tokens) and d loss / d logp = -adv / 5
    assert loss.item() == pytest.approx(-(2 * 2.0 + 3 * -1.0) / 5)
    expected = torch.tensor([[-0.4, -0.4, 0.0], [0.2, 0.2, 0.2]], dtype=torch.float64)
    assert torch.allclose(logp.grad, expected)
    assert stats["clip_frac"] == 0.0 and stats["ratio_mean"] == pytest.approx(1.0)


def test_seq_mean_weights_sequences_equally_and_constant_divides_by_normaliser():
    logp = leaf([[-1.0, -1.0, -1.0], [-1.0, -1.0, -1.0]])
    mask = torch.tensor([[1, 0, 0], [1, 1, 1]])
    adv = torch.tensor([1.0, 1.0], dtype=torch.float64)
    loss, _ = grpo_loss(logp, logp.detach().clone(), adv, mask, aggregation="seq-mean")
    loss.backward()
    assert torch.allclose(
        logp.grad, torch.tensor([[-0.5, 0, 0], [-1 / 6, -1 / 6, -1 / 6]], dtype=torch.float64)
    )
    logp.grad = None
    loss, _ = grpo_loss(logp, logp.detach().clone(), adv, mask, aggregation="constant", normaliser=10.0)
    loss.backward()
    assert loss.item() == pytest.approx(-4 / 10)
    assert torch.allclose(logp.grad[mask == 1], torch.full((4,), -0.1, dtype=torch.float64))
    with pytest.raises(ValueError):
        grpo_loss(logp, logp.detach(), adv, mask, aggregation="constant")


def test_clip_low_and_clip_high_are_separate():
    old = torch.zeros((1, 1), dtype=torch.float64)
    mask = torch.ones((1, 1))
    pos, neg = torch.tensor([1.0], dtype=torch.float64), torch.tensor([-1.0], dtype=torch.float64)

    def grad(ratio, adv):
        logp = leaf([[math.log(ratio)]])
        loss, stats = grpo_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.28)
        loss.backward()
        return float(logp.grad), stats["clip_frac"]

    assert grad(1.25, pos) == (pytest.approx(-1.25), 0.0)  # inside clip-high although above 1 + clip_low
    assert grad(1.30, pos) == (0.0, 1.0)  # above 1 + clip_high: no push further up
    assert grad(0.85, neg) == (pytest.approx(0.85), 0.0)
    assert grad(0.75, neg) == (0.0, 1.0)  # below 1 - clip_low: no push further down
    assert grad(0.5, pos)[0] == pytest.approx(-0.5)  # the pessimistic bound keeps gradients that help


def test_k3_kl_is_zero_at_the_reference_and_matches_the_formula():
    logp = leaf([[-1.0, -2.0]])
    mask = torch.ones((1, 2))
    zero_adv = torch.zeros(1, dtype=torch.float64)
    loss, stats = grpo_loss(logp, logp.detach(), zero_adv, mask, ref_logp=logp.detach().clone(), kl_coef=1.0)
    loss.backward()
    assert loss.item() == 0.0 and stats["kl"] == 0.0 and (logp.grad == 0).all()
    ref = torch.tensor([[-1.5, -1.0]], dtype=torch.float64)
    loss, stats = grpo_loss(logp, logp.detach(), zero_adv, mask, ref_logp=ref, kl_coef=0.5)
    d = ref - logp.detach()
    k3 = (torch.exp(d) - d - 1).mean()
    assert stats["kl"] == pytest.approx(float(k3))
    assert loss.item() == pytest.approx(0.5 * float(k3))


def test_zero_variance_group_contributes_nothing_to_the_gradient():
    rewards = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 1.0]])
    adv, _ = group_advantages(rewards, "std", zero_variance="keep")
    torch.manual_seed(0)
    logp = leaf(torch.randn(8, 5).tolist())
    old = logp.detach() + 0.05 * torch.randn(8, 5, dtype=torch.float64)
    loss, _ = grpo_loss(logp, old, adv.flatten().double(), torch.ones(8, 5), aggregation="token-mean")
    loss.backward()
    assert (logp.grad[:4] == 0).all()  # the all-equal group
    assert (logp.grad[4:] != 0).any()


def test_importance_weights_scale_the_token_gradient():
    logp = leaf([[-1.0, -1.0]])
    weights = torch.tensor([[0.5, 2.0]], dtype=torch.float64)
    loss, _ = grpo_loss(
        logp,
        logp.detach().clone(),
        torch.tensor([1.0], dtype=torch.float64),
        torch.ones(1, 2),
        is_weights=weights,
    )
    loss.backward()
    assert torch.allclose(logp.grad, torch.tensor([[-0.25, -1.0]], dtype=torch.float64))


def test_token_logprobs_match_log_softmax_and_temperature():
    torch.manual_seed(1)
    logits = torch.randn(2, 4, 7)
    ids = torch.randint(0, 7, (2, 4))
    out = token_logprobs(logits, ids, temperature=0.5)
    manual = torch.log_softmax(logits[0, 1] / 0.5, -1)[ids[0, 2]]
    assert out[0, 2].item() == pytest.approx(manual.item(), abs=1e-6)
    assert (out[:, 0] == 0).all() and out.shape == ids.shape


def test_pass_at_k_known_values():
    assert pass_at_k(4, 0, 4) == 0.0
    assert pass_at_k(4, 1, 4) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)


def test_the_baseline_ignores_episodes_excluded_from_training():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 9.0]])  # the last one failed: its reward means nothing
    valid = torch.tensor([[True, True, True, False]])
    adv, keep = group_advantages(rewards, "mean", valid=valid)
    assert torch.allclose(adv, torch.tensor([[2 / 3, -1 / 3, -1 / 3, 0.0]]))
    assert keep.tolist() == [[True, True, True, False]]
    # the kept episodes get what they would get without the excluded one
    alone, _ = group_advantages(rewards[:, :3], "std")
    with_excluded, _ = group_advantages(rewards, "std", valid=valid)
    assert torch.allclose(with_excluded[:, :3], alone)
    # a group left with one valid episode has no baseline: advantage 0, skipped
    adv, keep = group_advantages(rewards, "std", valid=torch.tensor([[True, False, False, False]]))
    assert not keep.any() and torch.equal(adv, torch.zeros_like(adv))


@pytest.mark.parametrize("aggregation", ["seq-mean", "token-mean", "constant"])
def test_micro_batch_losses_add_up_to_the_step_loss(aggregation):
    torch.manual_seed(0)
    logp, old = torch.randn(6, 9) * 0.1, torch.randn(6, 9) * 0.1
    mask = (torch.rand(6, 9) > 0.4).float()
    mask[4] = 0.0  # a sequence with nothing trained
    adv = torch.randn(6)
    whole = {"aggregation": "constant", "normaliser": 6 * 9.0} if aggregation == "constant" else {
        "aggregation": aggregation}
    expected, _ = grpo_loss(logp, old, adv, mask, **whole)
    parts = [
        step_loss(logp[s], old[s], adv[s], mask[s], aggregation=aggregation, step_mask=mask,
                  max_new_tokens=9)[0]
        for s in (slice(0, 2), slice(2, 5), slice(5, 6))
    ]
    assert float(sum(parts)) == pytest.approx(float(expected), rel=1e-6)
    with pytest.raises(ValueError, match="unknown aggregation"):
        step_loss(logp, old, adv, mask, aggregation="sum", step_mask=mask, max_new_tokens=9)
