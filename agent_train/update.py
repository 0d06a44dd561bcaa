"""One policy update: the trained samples as padded tensors, and one optimizer step on them.

What is aggregated how (tokens, sequences, the importance weights' cap) is `grpo.py`'s; this
module only batches, recomputes logprobs and steps the optimizer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agentrl.agent_train.config import TrainConfig
from agentrl.agent_train.credit import Advantage, advantage_tensor
from agentrl.agent_train.grpo import step_loss, token_logprobs
from agentrl.agent_train.rollout import Episode


def build_batch(episodes: list[Episode], advantages: list[Advantage], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded tensors; the mask is the transcripts' provenance mask, padded with 0; the
    advantages one per sequence (n,), or per token (n, width) where any is given per turn."""
    width = max(len(e.transcript.ids) for e in episodes)
    n = len(episodes)
    batch = {
        "ids": torch.full((n, width), pad_id, dtype=torch.long),
        "attention": torch.zeros((n, width), dtype=torch.long),
        "mask": torch.zeros((n, width)),
        "behav_logp": torch.zeros((n, width)),
        "versions": torch.full((n, width), -1, dtype=torch.long),
        "adv": advantage_tensor(episodes, advantages, width),
    }
    for i, e in enumerate(episodes):
        t, m = e.transcript, len(e.transcript.ids)
        batch["ids"][i, :m] = torch.tensor(t.ids)
        batch["attention"][i, :m] = 1
        batch["mask"][i, :m] = torch.tensor(t.mask, dtype=torch.float32)
        batch["behav_logp"][i, :m] = torch.tensor(t.logprobs)
        batch["versions"][i, :m] = torch.tensor(t.versions)
    return batch


def select_samples(
    groups: list[list[Episode]], adv: Any, keep: Any, version: int, max_staleness: int
) -> tuple[list[Episode], list[Advantage], int]:
    """What gets trained on: not excluded (drift, errors), not too stale, not in a skipped group.
    `adv` and `keep` are indexed [group][episode] (tensors, or `credit.Credit`'s lists, whose
    advantages may be one per turn)."""
    chosen, chosen_adv, stale = [], [], 0
    for gi, group in enumerate(groups):
        for ei, e in enumerate(group):
            sampled = [v for v, m in zip(e.transcript.versions, e.transcript.mask, strict=True) if m]
            if version - min(sampled, default=version) > max_staleness:
                stale += 1
            elif keep[gi][ei] and e.excluded is None and sampled:
                chosen.append(e)
                a = adv[gi][ei]
                chosen_adv.append(a if isinstance(a, list) else float(a))
    return chosen, chosen_adv, stale


def sequence_logprobs(
    model: Any,
    ids: torch.Tensor,
    attention: torch.Tensor,
    temperature: float,
    autocast: bool,
    suppress_ids: list[int] | None = None,
) -> torch.Tensor:
    device = next(model.parameters()).device
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=autocast):
        logits = model(input_ids=ids.to(device), attention_mask=attention.to(device)).logits
    return token_logprobs(logits, ids.to(device), temperature, suppress_ids)


def optimize(
    policy: Any,
    ref: Any | None,
    optimizer: torch.optim.Optimizer,
    batch: dict[str, torch.Tensor],
    cfg: TrainConfig,
    autocast: bool,
    suppress: list[int],
) -> dict[str, float]:
    n = batch["ids"].shape[0]
    device = next(policy.parameters()).device
    micro = [slice(i, min(i + cfg.micro_batch, n)) for i in range(0, n, cfg.micro_batch)]
    b = {k: v.to(device) for k, v in batch.items()}
    # Tokens from older policies than the current one get a truncated importance weight.
    with torch.no_grad():
        if cfg.recompute_logprobs:
            old = torch.cat(
                [
                    sequence_logprobs(
                        policy, b["ids"][s], b["attention"][s], cfg.temperature, autocast, suppress
                    )
                    for s in micro
                ]
            )
        else:
            old = b["behav_logp"]
        weights = torch.clamp(torch.exp(old - b["behav_logp"]), max=cfg.is_cap) * b["mask"]
        ref_logp = None
        if ref is not None:
            ref_logp = torch.cat(
                [
                    sequence_logprobs(
                        ref, b["ids"][s], b["attention"][s], cfg.temperature, autocast, suppress
                    )
                    for s in micro
                ]
            )
    total_tokens = float(b["mask"].sum().clamp_min(1))
    stats: dict[str, float] = {}
    policy.train()
    for _ in range(cfg.epochs_per_step):
        optimizer.zero_grad(set_to_none=True)
        loss_sum, parts = 0.0, []
        for s in micro:
            logp = sequence_logprobs(
                policy, b["ids"][s], b["attention"][s], cfg.temperature, autocast, suppress
            )
            loss, part = step_loss(
                logp,
                old[s],
                b["adv"][s],
                b["mask"][s],
                aggregation=cfg.aggregation,
                step_mask=b["mask"],
                max_new_tokens=cfg.max_new_tokens,
                clip_low=cfg.clip_low,
                clip_high=cfg.clip_high,
                ref_logp=None if ref_logp is None else ref_logp[s],
                kl_coef=cfg.kl_coef,
                is_weights=weights[s],
            )
            loss.backward()
            loss_sum += float(loss.detach())
            parts.append(part)
        grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
        optimizer.step()
        stats = {
            "loss": loss_sum,
            "grad_norm": float(grad_norm),
            **{k: float(np.mean([p[k] for p in parts])) for k in parts[0]},
        }
    stats["is_weight_mean"] = float(weights.sum() / b["mask"].sum().clamp_min(1))
    mismatch = torch.where(b["mask"] > 0, (old - b["behav_logp"]).abs(), 0.0)
    stats["logprob_mismatch"] = float(mismatch.sum() / total_tokens)
    return stats
