"""Held-out success of a model on its own, outside a GRPO run (before training, after SFT)."""

from __future__ import annotations

from typing import Any

from agentrl.agent_train.accounting import FailureGuard, TaskLedger
from agentrl.agent_train.config import TrainConfig


def evaluate_policy(cfg: TrainConfig, policy: Any, tokenizer: Any, log: Any = print) -> dict[str, Any]:
    """`cfg.eval_seeds` x `cfg.eval_k` episodes of the eval split, as a GRPO run evaluates.

    Returns the scores, the per-episode successes and seeds (for significance tests and per-task
    tables) and the task ids."""
    from agentrl.agent_train.train import RolloutProducer, eval_seeds, make_backend, rollout_specs

    device = str(next(policy.parameters()).device)
    backend = make_backend(cfg, policy, tokenizer, device)
    train_spec, eval_spec = rollout_specs(cfg, backend, tokenizer, log)
    producer = RolloutProducer(cfg, train_spec, eval_spec)
    try:
        scores, episodes = producer.evaluate(eval_seeds(cfg), cfg.eval_k)
    finally:
        producer.close()
    scores.update(
        FailureGuard(cfg.max_idle_steps, cfg.max_excluded_frac, log).check_episodes("eval", episodes)
    )
    ledger = TaskLedger()
    ledger.add_eval(episodes)
    return {
        "scores": scores,
        "successes": [bool(e.success) for e in episodes],
        "seeds": [e.seed for e in episodes],
        "turns": [e.turns for e in episodes],
        "task_ids": sorted(ledger.eval),
    }
