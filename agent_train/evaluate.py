"""Held-out evaluation: success rate and pass@k on seeds never used for training."""

from __future__ import annotations

from collections.abc import Callable
from math import comb
from typing import Any

from agentrl.agent_train.backends import GenerationBackend
from agentrl.agent_train.rollout import EnvDriver, RolloutLimits, collect_groups


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c successes (Chen et al., 2021)."""
    if k > n:
        raise ValueError("k must not exceed the number of samples")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


async def evaluate(
    make_driver: Callable[[], EnvDriver],
    backend: GenerationBackend,
    tokenizer: Any,
    seeds: list[int],
    k: int,
    limits: RolloutLimits,
    concurrency: int = 64,
    system_prompt: str | None = None,
    sample_seed: int | None = None,
) -> dict[str, float]:
    groups = await collect_groups(
        make_driver, backend, tokenizer, seeds, k, limits, concurrency, system_prompt, sample_seed
    )
    successes = [sum(e.success for e in g) for g in groups]
    rewards = [e.reward for g in groups for e in g]
    return {
        "eval_success": sum(successes) / (len(seeds) * k),
        "eval_pass_at_k": sum(pass_at_k(k, c, k) for c in successes) / len(seeds),
        "eval_reward": sum(rewards) / len(rewards),
    }
