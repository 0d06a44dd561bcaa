"""GRPO with TRL on Flights-v0: `GRPOTrainer(environment_factory=...)` from agentrl.integrations.trl.

TRL renders the env's tools into the chat template, parses the model's tool calls, runs them on the
agentrl env (one step each) and takes the env's reward. Needs `pip install -e '.[trl]'`, a chat model
whose template TRL knows for tool calling (Qwen3 and others), and a GPU to be quick:

    agentrl serve --port 8000 &
    python examples/trl_grpo.py --model Qwen/Qwen3-0.6B --env-url http://127.0.0.1:8000 --steps 20

Without --env-url the env runs in the training process.
"""

from __future__ import annotations

import argparse

import torch
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from agentrl.integrations.trl import dataset_rows, environment_factory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="Qwen/Qwen3-0.6B", help="a hub id or a local folder")
    parser.add_argument("--env", default="agentrl/Flights-v0")
    parser.add_argument("--env-url", default=None, help="an `agentrl serve` server; default: in-process")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=256, help="train seeds 0..tasks-1")
    parser.add_argument("--out", default="runs/trl-grpo")
    args = parser.parse_args()

    config = GRPOConfig(
        output_dir=args.out, max_steps=args.steps, num_generations=args.group_size,
        per_device_train_batch_size=args.group_size, max_completion_length=4096,
        max_tool_calling_iterations=30, learning_rate=1e-6, logging_steps=1, report_to="none",
        # TRL defaults to bf16 on a GPU; on a machine without one it must be told to use the CPU
        use_cpu=not torch.cuda.is_available(), bf16=torch.cuda.is_available(),
    )
    trainer = GRPOTrainer(
        model=args.model, args=config,
        train_dataset=Dataset.from_list(dataset_rows(range(args.tasks), split="train")),
        environment_factory=environment_factory(args.env, base_url=args.env_url),
    )
    trainer.train()
    for row in trainer.state.log_history:
        rewards = {k: v for k, v in row.items() if k.startswith("rewards/")}
        if rewards:
            print(row.get("step"), rewards)


if __name__ == "__main__":
    main()
