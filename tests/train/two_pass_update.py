"""The policy update as it was before `update.optimize` learned to skip work: the reference of
tests/train/test_train_update.py and the baseline of bench/update.py, kept out of the package.

Old logprobs from a separate no_grad pass, then the loss pass; both compute full-vocabulary logits
at every position of every sequence.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agentrl.agent_train.config import TrainConfig
from agentrl.agent_train.grpo import step_loss, token_logprobs


def full_logprobs(model: Any, ids: torch.Tensor, attention: torch.Tensor, cfg: TrainConfig,
                  suppress: list[int]) -> torch.Tensor:
    logits = model(input_ids=ids, attention_mask=attention).logits
    return token_logprobs(logits, ids, cfg.temperature, suppress)


def reference_optimize(policy, ref, optimizer, b, cfg: TrainConfig, suppress: list[int]) -> dict[str, float]:
    """The update as it was: old logprobs from a separate no_grad pass, full logits everywhere."""
    n = b["ids"].shape[0]
    micro = [slice(i, min(i + cfg.micro_batch, n)) for i in range(0, n, cfg.micro_batch)]
    with torch.no_grad():
        if cfg.recompute_logprobs:
            old = torch.cat([full_logprobs(policy, b["ids"][s], b["attention"][s], cfg, suppress)
                             for s in micro])
        else:
            old = b["behav_logp"]
        weights = torch.clamp(torch.exp(old - b["behav_logp"]), max=cfg.is_cap) * b["mask"]
        ref_logp = None
        if ref is not None:
            ref_logp = torch.cat([full_logprobs(ref, b["ids"][s], b["attention"][s], cfg, suppress)
                                  for s in micro])
    total_tokens = float(b["mask"].sum().clamp_min(1))
    policy.train()
    for _ in range(cfg.epochs_per_step):
        optimizer.zero_grad(set_to_none=True)
        loss_sum, parts = 0.0, []
        for s in micro:
            logp = full_logprobs(policy, b["ids"][s], b["attention"][s], cfg, suppress)
            loss, part = step_loss(
                logp, old[s], b["adv"][s], b["mask"][s], aggregation=cfg.aggregation, step_mask=b["mask"],
                max_new_tokens=cfg.max_new_tokens, clip_low=cfg.clip_low, clip_high=cfg.clip_high,
                ref_logp=None if ref_logp is None else ref_logp[s], kl_coef=cfg.kl_coef,
                is_weights=weights[s],
            )
            loss.backward()
            loss_sum += float(loss.detach())
            parts.append(part)
        grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
        optimizer.step()
        stats = {"loss": loss_sum, "grad_norm": float(grad_norm),
                 **{k: float(np.mean([p[k] for p in parts])) for k in parts[0]}}
    stats["is_weight_mean"] = float(weights.sum() / b["mask"].sum().clamp_min(1))
    mismatch = torch.where(b["mask"] > 0, (old - b["behav_logp"]).abs(), 0.0)
    stats["logprob_mismatch"] = float(mismatch.sum() / total_tokens)
    return stats
