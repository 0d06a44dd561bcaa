"""The GRPO objective: group-normalised advantages and a masked, clipped policy-gradient loss.

Kept as small pure functions so that their known answers can be tested directly: masked
positions get exactly zero gradient, and a group whose rewards are all equal contributes nothing.
Every aggregation choice of a run lives here: the advantage baseline (`group_advantages`), how a
loss averages tokens and sequences (`grpo_loss`), and how micro-batches add up to one optimizer
step's loss (`step_loss`).
"""

from __future__ import annotations

from typing import Any, Literal

import torch

AdvantageMode = Literal["std", "mean"]
ZeroVariance = Literal["skip", "keep"]
Aggregation = Literal["seq-mean", "token-mean", "constant"]


def group_advantages(
    rewards: torch.Tensor,
    mode: AdvantageMode = "std",
    eps: float = 1e-6,
    zero_variance: ZeroVariance = "skip",
    valid: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages for `rewards` of shape (groups, group_size); returns (advantages, keep).

    "std" is GRPO's (r - mean) / std; "mean" is Dr. GRPO's r - mean, which does not up-weight
    near-uniform groups. `valid` (same shape, bool) marks the episodes that may be trained on:
    the baseline is computed over those alone, so an episode excluded later (an error, drift)
    cannot shift its group's mean; invalid ones get advantage 0 and keep False. A group with
    zero variance (or fewer than two valid episodes) has advantage exactly 0 either way (no
    division by a zero std); `keep` is False for its samples under "skip".
    """
    if rewards.dim() != 2:
        raise ValueError("rewards must have shape (groups, group_size)")
    if valid is None:
        valid = torch.ones_like(rewards, dtype=torch.bool)
    w = valid.to(rewards.dtype)
    n = w.sum(dim=1, keepdim=True)
    mean = (rewards * w).sum(dim=1, keepdim=True) / n.clamp_min(1.0)
    centred = (rewards - mean) * w
    std = ((centred**2).sum(dim=1, keepdim=True) / n.clamp_min(1.0)).sqrt()
    flat = (std <= eps) | (n < 2)
    if mode == "std":
        adv = torch.where(flat, torch.zeros_like(centred), centred / std.clamp_min(eps))
    elif mode == "mean":
        adv = torch.where(flat, torch.zeros_like(centred), centred)
    else:
        raise ValueError(f"unknown advantage mode {mode!r}")
    if zero_variance == "skip":
        keep = valid & ~flat.expand_as(rewards)
    elif zero_variance == "keep":
        keep = valid.clone()
    else:
        raise ValueError(f"unknown zero-variance policy {zero_variance!r}")
    return adv, keep


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    aggregation: Aggregation = "token-mean",
    normaliser: float | None = None,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped surrogate over tokens of shape (batch, seq); `mask` is 1 on trained tokens.

    `advantages` is per sequence (batch,) or per token. `is_weights` (per token, no grad) corrects
    for tokens sampled by an older policy than `old_logp`'s. Aggregation: "seq-mean" averages
    each sequence then the batch (GRPO), "token-mean" averages all trained tokens (DAPO),
    "constant" divides the token sum by `normaliser` (Dr. GRPO; e.g. batch * max tokens), so the
    gradient of one token does not depend on the length of the others.
    """
    mask = mask.to(logp.dtype)
    adv = advantages if advantages.dim() == 2 else advantages[:, None].expand_as(logp)
    # Masked positions are replaced (not multiplied) so that inf/nan there cannot leak into gradients.
    log_ratio = torch.where(mask > 0, logp - old_logp, torch.zeros_like(logp))
    ratio = torch.exp(log_ratio)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * adv
    per_token = -torch.minimum(unclipped, clipped)
    if is_weights is not None:
        per_token = per_token * is_weights.detach()
    kl = torch.zeros((), dtype=logp.dtype)
    if ref_logp is not None and kl_coef > 0:
        # k3 estimator of KL(pi || ref): exp(ref - pi) - (ref - pi) - 1, >= 0 and unbiased.
        d = torch.where(mask > 0, ref_logp - logp, torch.zeros_like(logp))
        k3 = torch.exp(d) - d - 1.0
        per_token = per_token + kl_coef * k3
        kl = (k3 * mask).sum() / mask.sum().clamp_min(1.0)
    per_token = torch.where(mask > 0, per_token, torch.zeros_like(per_token))

    if aggregation == "seq-mean":
        per_seq = per_token.sum(dim=1) / mask.sum(dim=1).clamp_min(1.0)
        has_tokens = (mask.sum(dim=1) > 0).to(logp.dtype)
        loss = per_seq.sum() / has_tokens.sum().clamp_min(1.0)
    elif aggregation == "token-mean":
        loss = per_token.sum() / mask.sum().clamp_min(1.0)
    elif aggregation == "constant":
        if not normaliser:
            raise ValueError("aggregation 'constant' needs a positive normaliser")
        loss = per_token.sum() / normaliser
    else:
        raise ValueError(f"unknown aggregation {aggregation!r}")

    with torch.no_grad():
        n = mask.sum().clamp_min(1.0)
        was_clipped = ((ratio < 1.0 - clip_low) & (adv < 0)) | ((ratio > 1.0 + clip_high) & (adv > 0))
        stats = {
            "clip_frac": float((was_clipped.to(logp.dtype) * mask).sum() / n),
            "ratio_mean": float((ratio * mask).sum() / n),
            "kl": float(kl),
        }
    return loss, stats


def token_logprobs(
    logits: torch.Tensor, ids: torch.Tensor, temperature: float = 1.0, suppress_ids: list[int] | None = None
) -> torch.Tensor:
    """Logprob of ids[:, t] under logits[:, t-1]; position 0 (no context) gets 0."""
    out = next_token_logprobs(logits[:, :-1], ids[:, 1:], temperature, suppress_ids)
    return torch.cat([torch.zeros_like(out[:, :1]), out], dim=1)


def next_token_logprobs(
    logits: torch.Tensor,
    targets: torch.Tensor,
    temperature: float = 1.0,
    suppress_ids: list[int] | None = None,
) -> torch.Tensor:
    """Logprob of each `targets` id under the `logits` (..., vocab) that predicted it.

    Applies what the sampler applied (temperature, never-sampled ids) so that recomputed
    logprobs are those of the distribution the tokens were drawn from. float32 throughout,
    which is what bf16 logits need to stay accurate. Any leading shape: a batch of sequences
    (`token_logprobs`) or only the positions that are trained (`update.sequence_logprobs`).
    """
    logits = logits.float() / temperature
    if suppress_ids:
        logits = logits.index_fill(-1, torch.tensor(suppress_ids, device=logits.device), float("-inf"))
    picked = torch.gather(logits, -1, targets[..., None]).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def step_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    aggregation: Aggregation | str,
    step_mask: torch.Tensor,
    max_new_tokens: int,
    **loss_kwargs: Any,
) -> tuple[torch.Tensor, dict[str, float]]:
    """`grpo_loss` of one micro-batch of an optimizer step, scaled so that the micro-batches' losses
    add up to the loss of the whole step under `aggregation`; `step_mask` is the step's whole mask.

    "token-mean" divides by the step's trained tokens (not the micro-batch's); "constant" by the
    step's sequences times `max_new_tokens`; "seq-mean" averages the micro-batch's sequences, then
    weighs that mean by the micro-batch's share of the step's sequences with tokens.
    """
    if aggregation == "token-mean":
        total_tokens = float(step_mask.sum().clamp_min(1))
        return grpo_loss(logp, old_logp, advantages, mask, aggregation="constant", normaliser=total_tokens,
                         **loss_kwargs)
    if aggregation == "constant":
        normaliser = float(step_mask.shape[0] * max_new_tokens)
        return grpo_loss(logp, old_logp, advantages, mask, aggregation="constant", normaliser=normaliser,
                         **loss_kwargs)
    if aggregation != "seq-mean":
        raise ValueError(f"unknown aggregation {aggregation!r}")
    loss, stats = grpo_loss(logp, old_logp, advantages, mask, aggregation="seq-mean", **loss_kwargs)
    seqs_with_tokens = float((step_mask.sum(1) > 0).sum().clamp_min(1))
    return loss * float((mask.sum(1) > 0).sum()) / seqs_with_tokens, stats
