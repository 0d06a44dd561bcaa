"""One policy update: the trained samples as padded tensors, and one optimizer step on them.

What is aggregated how (tokens, sequences, the importance weights' cap) is `grpo.py`'s; this
module only batches, recomputes logprobs and steps the optimizer. Logits are computed only where
they are used (the positions that predict a trained token), and the old logprobs come from the loss
pass itself when the policy cannot move in between (`optimize`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from agentrl.agent_train.config import TrainConfig
from agentrl.agent_train.credit import Advantage, advantage_tensor
from agentrl.agent_train.grpo import next_token_logprobs, step_loss
from agentrl.agent_train.rollout import RolloutEpisode


def build_batch(
    episodes: list[RolloutEpisode], advantages: list[Advantage], pad_id: int
) -> dict[str, torch.Tensor]:
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
    groups: list[list[RolloutEpisode]], adv: Any, keep: Any, version: int, max_staleness: int
) -> tuple[list[RolloutEpisode], list[Advantage], int]:
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


# Causal LMs whose logits are exactly `lm_head(base_model(...).last_hidden_state)`: no softcapping or
# scaling after the head (Gemma2, Granite and Cohere have one), so the head can run on a few positions.
PLAIN_HEAD_MODEL_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3", "smollm3", "phi3", "olmo2"})


def output_head(model: Any) -> torch.nn.Module | None:
    """The output head that maps the body's last hidden states to logits, where the model is one
    whose logits are that head's output and nothing more; None for any other (full logits then)."""
    if getattr(model.config, "model_type", None) not in PLAIN_HEAD_MODEL_TYPES:
        return None
    head = model.get_output_embeddings()
    return head if isinstance(head, torch.nn.Linear) and model.base_model is not model else None


def has_dropout(model: Any) -> bool:
    """Whether a forward pass in train mode can differ from one in eval mode: a dropout module with
    p > 0, or a dropout probability in the config (Llama's attention dropout is functional, no module)."""
    if any(isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0 for m in model.modules()):
        return True
    config = model.config.to_dict() if hasattr(model, "config") else {}
    return any(
        ("dropout" in key or "pdrop" in key) and isinstance(value, (int, float)) and value > 0
        for key, value in config.items()
    )


def sequence_logprobs(
    model: Any,
    ids: torch.Tensor,
    attention: torch.Tensor,
    trained: torch.Tensor,
    temperature: float,
    autocast: bool,
    suppress_ids: list[int] | None = None,
) -> torch.Tensor:
    """Logprob of each trained token (`trained` > 0) under `model`, shape (n, width), 0 elsewhere.

    The output head (a vocabulary-wide matmul, most of a small model's cost) runs only at the
    positions that predict a trained token, not at every prompt and tool-output position; a model
    without a separable head (`output_head`) computes full logits and keeps the trained positions.
    """
    device = next(model.parameters()).device
    ids, attention, trained = ids.to(device), attention.to(device), trained.to(device) > 0
    head = output_head(model)
    rows, cols = trained[:, 1:].nonzero(as_tuple=True)  # position cols predicts token cols + 1
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=autocast):
        if head is None:
            logits = model(input_ids=ids, attention_mask=attention, use_cache=False).logits[rows, cols]
        else:
            body = model.base_model(input_ids=ids, attention_mask=attention, use_cache=False)
            logits = head(body.last_hidden_state[rows, cols])
    picked = next_token_logprobs(logits, ids[rows, cols + 1], temperature, suppress_ids)
    return torch.zeros(ids.shape, dtype=picked.dtype, device=device).index_put((rows, cols + 1), picked)


def importance_weights(
    old: torch.Tensor, behav: torch.Tensor, mask: torch.Tensor, cap: float
) -> torch.Tensor:
    """Truncated importance weights of tokens sampled by an older policy than `old`'s, 0 where untrained."""
    return torch.clamp(torch.exp(old - behav), max=cap) * mask


Pass = tuple[slice, int]  # rows of a step, and the width they are cut to (the longest of them)


def token_passes(lengths: list[int], pass_tokens: int, max_rows: int = 0) -> list[slice]:
    """Consecutive rows cut into passes whose padded size (rows x the longest) stays within
    `pass_tokens`, of at most `max_rows` rows (0: no cap); a row longer than that is a pass of its own.

    A forward/backward pass holds its activations until its backward: bounding its padded tokens
    bounds a step's memory whatever the step's size, gradients accumulating across passes."""
    passes: list[slice] = []
    start, longest = 0, 0
    for i, length in enumerate(lengths):
        longest = max(longest, length)
        rows = i - start + 1
        if i > start and (rows * longest > pass_tokens or (max_rows and rows > max_rows)):
            passes.append(slice(start, i))
            start, longest = i, length
    if lengths:
        passes.append(slice(start, len(lengths)))
    return passes


@contextlib.contextmanager
def checkpointed_activations(model: Any, enabled: bool) -> Iterator[None]:
    """Within: the model's layers keep only their inputs for backward and recompute the rest there
    (non-reentrant `torch.utils.checkpoint`), so a pass's memory is its layer inputs plus one
    layer's activations instead of every layer's. The recomputation runs the same operations on
    the same inputs: gradients are those of a plain pass; the cost is one more forward."""
    # transformers 5 renamed `gradient_checkpointing_*` to `activation_checkpointing_*`
    name = "activation" if hasattr(model, "activation_checkpointing_enable") else "gradient"
    able = getattr(model, "supports_gradient_checkpointing", False)
    if not enabled or not able or getattr(model, f"is_{name}_checkpointing"):
        yield
        return
    getattr(model, f"{name}_checkpointing_enable")({"use_reentrant": False})
    try:
        yield
    finally:
        getattr(model, f"{name}_checkpointing_disable")()


def optimize(
    policy: Any,
    ref: Any | None,
    optimizer: torch.optim.Optimizer,
    batch: dict[str, torch.Tensor],
    cfg: TrainConfig,
    autocast: bool,
    suppress: list[int],
) -> dict[str, float]:
    """`cfg.epochs_per_step` optimizer steps on `batch`; returns the last step's stats.

    The batch goes through in passes of at most `cfg.micro_batch` sequences and `cfg.pass_tokens`
    padded tokens (`token_passes`), each cut to its own longest sequence, gradients accumulated
    (`step_loss` scales each pass so that they add up to the step's loss); with
    `cfg.checkpoint_activations` a pass keeps only its layers' inputs for backward.

    With one optimizer step per batch the policy cannot move between the old-logprob pass and the
    loss pass, so the old logprobs are the loss pass's own, detached (one forward instead of two).
    That is exact only when the two passes compute the same function: the loss pass runs in train
    mode, which for a model without dropout changes nothing (no batch norm in a causal LM); a model
    with any dropout keeps the separate pass (its old logprobs are those of the mode it is in).
    """
    device = next(policy.parameters()).device
    b = {k: v.to(device) for k, v in batch.items()}
    lengths = b["attention"].sum(1).tolist()
    passes = [(s, max(lengths[s])) for s in token_passes(lengths, cfg.pass_tokens, cfg.micro_batch)]

    def logprobs(model: Any, p: Pass) -> torch.Tensor:
        ids, attention, mask = cut(b["ids"], p), cut(b["attention"], p), cut(b["mask"], p)
        return sequence_logprobs(model, ids, attention, mask, cfg.temperature, autocast, suppress)

    one_pass = cfg.recompute_logprobs and cfg.epochs_per_step == 1 and not has_dropout(policy)
    old: torch.Tensor | None = None
    weights: torch.Tensor | None = None
    # Tokens from older policies than the current one get a truncated importance weight.
    with torch.no_grad():
        if not one_pass:
            old = b["behav_logp"]
            if cfg.recompute_logprobs:
                old = whole(b["mask"], passes, [logprobs(policy, p) for p in passes])
            weights = importance_weights(old, b["behav_logp"], b["mask"], cfg.is_cap)
        ref_logp = None if ref is None else whole(b["mask"], passes, [logprobs(ref, p) for p in passes])
    total_tokens = float(b["mask"].sum().clamp_min(1))
    stats: dict[str, float] = {}
    policy.train()
    for _ in range(cfg.epochs_per_step):
        optimizer.zero_grad(set_to_none=True)
        loss_sum, parts, olds = 0.0, [], []
        with checkpointed_activations(policy, cfg.checkpoint_activations):
            for p in passes:
                logp = logprobs(policy, p)
                if one_pass:
                    old_p = logp.detach()
                    olds.append(old_p)
                    weights_p = importance_weights(old_p, cut(b["behav_logp"], p), cut(b["mask"], p),
                                                   cfg.is_cap)
                else:
                    assert old is not None and weights is not None, "the separate pass ran before the loop"
                    old_p, weights_p = cut(old, p), cut(weights, p)
                ref_p = None if ref_logp is None else cut(ref_logp, p)
                loss, part = pass_loss(logp, old_p, weights_p, b, p, cfg, ref_p)
                loss.backward()
                loss_sum += float(loss.detach())
                parts.append(part)
        if one_pass:
            old = whole(b["mask"], passes, olds)
            weights = importance_weights(old, b["behav_logp"], b["mask"], cfg.is_cap)
        grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
        optimizer.step()
        stats = {
            "loss": loss_sum,
            "grad_norm": float(grad_norm),
            **{k: float(np.mean([p[k] for p in parts])) for k in parts[0]},
        }
    assert old is not None and weights is not None, "set by the separate pass or by the loss pass"
    stats["is_weight_mean"] = float(weights.sum() / b["mask"].sum().clamp_min(1))
    mismatch = torch.where(b["mask"] > 0, (old - b["behav_logp"]).abs(), 0.0)
    stats["logprob_mismatch"] = float(mismatch.sum() / total_tokens)
    return stats


def pass_loss(
    logp: torch.Tensor,
    old: torch.Tensor,
    weights: torch.Tensor,
    b: dict[str, torch.Tensor],
    p: Pass,
    cfg: TrainConfig,
    ref_logp: torch.Tensor | None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss of pass `p` of step `b`, scaled by the whole step's mask only (`step_loss`), so that
    the passes' losses and gradients add up to the step's: a pass needs no other pass's weights."""
    return step_loss(
        logp,
        old,
        cut(b["adv"], p),
        cut(b["mask"], p),
        aggregation=cfg.aggregation,
        step_mask=b["mask"],
        max_new_tokens=cfg.max_new_tokens,
        clip_low=cfg.clip_low,
        clip_high=cfg.clip_high,
        ref_logp=ref_logp,
        kl_coef=cfg.kl_coef,
        is_weights=weights,
    )


def cut(values: torch.Tensor, p: Pass) -> torch.Tensor:
    """A pass's rows of a step tensor, cut to the pass's width where the tensor is per token."""
    rows, width = p
    return values[rows, :width] if values.dim() == 2 else values[rows]


def whole(like: torch.Tensor, passes: list[Pass], parts: list[torch.Tensor]) -> torch.Tensor:
    """The passes' per-token values put back at their rows and columns of a step tensor shaped as
    `like` (zeros past each pass's width: padding)."""
    out = torch.zeros(like.shape, dtype=parts[0].dtype, device=like.device)
    for (rows, width), part in zip(passes, parts, strict=True):
        out[rows, :width] = part
    return out
