"""Held-out evaluation: success rate and pass@k on tasks never used for training."""

from __future__ import annotations

from math import comb
from typing import Any

from agentrl.agent_train.rollout import RolloutEpisode, Rollouts, collect_groups


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c successes (Chen et al., 2021)."""
    if k > n:
        raise ValueError("k must not exceed the number of samples")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def eval_metrics(groups: list[list[RolloutEpisode]]) -> dict[str, float]:
    """Success over every episode (a failed one counts as a failure), pass@k per task, reward."""
    k = len(groups[0])
    successes = [sum(e.success for e in g) for g in groups]
    rewards = [e.reward for g in groups for e in g]
    return {
        "eval_success": sum(successes) / (len(groups) * k),
        "eval_pass_at_k": sum(pass_at_k(k, c, k) for c in successes) / len(groups),
        "eval_reward": sum(rewards) / len(rewards),
        "eval_episodes": float(len(rewards)),
    }


async def evaluate(
    spec: Rollouts, seeds: list[int], k: int, sample_seed: int | None = None, progress: bool = False
) -> tuple[dict[str, float], list[RolloutEpisode]]:
    """k episodes per seed; returns the metrics and the episodes (for task ids and failures)."""
    bar: Any = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(seeds) * k, desc="eval", unit="ep", leave=False)
    try:
        groups = await collect_groups(
            spec, seeds, k, sample_seed, on_done=(lambda _: bar.update(1)) if bar else None
        )
    finally:
        if bar is not None:
            bar.close()
    return eval_metrics(groups), [e for g in groups for e in g]
