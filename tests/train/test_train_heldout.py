"""Evaluation is held out by construction: for every env, the tasks a run evaluates on are never
among those it trains on (the env's `info["task_id"]`, under the trainer's own split kwargs and seeds)."""

from __future__ import annotations

import gymnasium as gym
import pytest
from support import unavailable

import agentrl  # noqa: F401  (registers the ids)
from agentrl.agent_train.accounting import split_kwargs
from agentrl.agent_train.config import TrainConfig
from agentrl.agent_train.train import eval_seeds, train_seeds


def task_ids(env_id: str, kwargs: dict, seeds: list[int]) -> list[str]:
    env = gym.make(env_id, **kwargs)
    try:
        return [str(env.reset(seed=s)[1]["task_id"]) for s in seeds]
    finally:
        env.close()


@pytest.mark.parametrize(
    "env_id", ["agentrl/Flights-v0", "agentrl/Search-v0", "agentrl/Bash-v0", "agentrl/Code-v0"]
)
def test_eval_tasks_are_never_training_tasks(env_id):
    cfg = TrainConfig(env=env_id, steps=8, groups_per_step=8, eval_seeds=24, seed=1)
    train_kwargs, applied = split_kwargs(env_id, cfg.env_kwargs, cfg.train_split)
    eval_kwargs, applied_eval = split_kwargs(env_id, cfg.env_kwargs, cfg.eval_split)
    assert applied and applied_eval, f"{env_id} takes no split= (contract 1)"
    assert (train_kwargs["split"], eval_kwargs["split"]) == ("train", "test")
    seeds = [s for step in range(cfg.steps) for s in train_seeds(cfg, step)]
    try:
        trained = task_ids(env_id, train_kwargs, seeds)
        evaluated = task_ids(env_id, eval_kwargs, eval_seeds(cfg))
    except Exception as exc:  # Bash/Code episodes need the Docker engine
        if "docker" in f"{type(exc).__name__} {exc}".lower():
            unavailable(f"{env_id} needs Docker: {exc}")
        raise
    assert len(set(evaluated)) > len(evaluated) // 2  # the ids name tasks: not one id for all
    assert not set(trained) & set(evaluated)
    # the ids are stable: the same seed and split name the same task
    assert task_ids(env_id, eval_kwargs, eval_seeds(cfg)[:3]) == evaluated[:3]


def test_a_run_logs_both_task_counts_and_their_overlap(tmp_path, toy_model, toy_tokenizer):
    """On an env that names its tasks by split, the run's log states the counts and overlap 0."""
    from agentrl.agent_train.train import train

    logged: list[str] = []
    cfg = TrainConfig(
        env="agentrl/Search-v0",
        env_kwargs={"max_turns": 1},
        model="tiny:1x32",
        steps=1,
        groups_per_step=2,
        group_size=2,
        max_new_tokens=4,
        token_budget=512,
        eval_seeds=3,
        eval_k=1,
        zero_variance="keep",
        out_dir=str(tmp_path / "run"),
        tensorboard=False,
        progress=False,
        plot=False,
    )
    from agentrl.agent_train.models import load_model

    policy, tokenizer = load_model(cfg.model, cfg.env, "cpu", 0, **cfg.env_kwargs)
    result = train(cfg, policy=policy, tokenizer=tokenizer, log=logged.append)
    assert result["tasks"] == {"train_tasks": 2, "eval_tasks": 3, "overlap": 0}
    assert "tasks: train 2 (split train), eval 3 (split test), overlap 0" in logged
