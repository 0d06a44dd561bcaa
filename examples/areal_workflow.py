"""Flights-v0 in AReaL: the rollout workflow its trainer runs for each dataset row.

Each row (`{"seed": 3, "split": "train"}`) is one episode; the workflow generates through AReaL's
inference engine and returns ids, loss mask, logprobs, versions and the env's reward. Serve the env
(`agentrl serve`), then, in AReaL's training script (`pip install -e '.[areal]'`, its own environment):

    AGENTRL_URL=http://127.0.0.1:8000 python examples/areal_workflow.py --config my_grpo.yaml
"""

from __future__ import annotations

import os
import sys

from areal import PPOTrainer
from areal.api.cli_args import GRPOConfig, load_expr_config
from areal.utils.hf_utils import load_hf_tokenizer
from datasets import Dataset

from agentrl.integrations.areal import AgentrlWorkflow


def main(args: list[str]) -> None:
    config, _ = load_expr_config(args, GRPOConfig)
    tokenizer = load_hf_tokenizer(config.tokenizer_path)
    workflow = AgentrlWorkflow("agentrl/Flights-v0", gconfig=config.gconfig, tokenizer=tokenizer,
                               base_url=os.environ.get("AGENTRL_URL", "http://127.0.0.1:8000"),
                               env_kwargs={"max_turns": 12},
                               system=[{"role": "system", "content": "You are an airline agent."}])
    rows = Dataset.from_list([{"seed": seed, "split": "train"} for seed in range(512)])
    with PPOTrainer(config, train_dataset=rows) as trainer:
        trainer.train(workflow=workflow)


if __name__ == "__main__":
    main(sys.argv[1:])
