"""Flights-v0 in verl: the agent-loop config file that plugs agentrl into verl's PPO/GRPO trainer.

verl loads the file in every rollout worker and builds `AgentrlAgentLoop` for the rows whose
`agent_name` is the entry's name; each row's `extra_info` picks the episode. This script writes the
file and the dataset (parquet, as verl reads it) for a server at AGENTRL_URL (`agentrl serve`), and
prints the trainer's overrides (`pip install -e '.[verl]'` on the GPU machine that trains):

    AGENTRL_URL=http://127.0.0.1:8000 python examples/verl_agent_loop.py runs/verl
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pandas as pd
import yaml

from agentrl.integrations.verl import agent_loop_config


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    url = os.environ.get("AGENTRL_URL", "http://127.0.0.1:8000")
    loops = out / "agentrl_agent.yaml"
    entry = agent_loop_config("agentrl_flights", "agentrl/Flights-v0", base_url=url)
    loops.write_text(yaml.safe_dump([entry]))
    system = [{"role": "system", "content": "You are an airline agent. Call one tool per turn."}]
    for split, seeds in (("train", range(512)), ("test", range(64))):
        rows = [{"data_source": "agentrl/Flights-v0", "agent_name": "agentrl_flights", "prompt": system,
                 "extra_info": {"seed": seed, "split": split, "index": seed}} for seed in seeds]
        pd.DataFrame(rows).to_parquet(out / f"{split}.parquet")
    print("python -m verl.trainer.main_ppo \\")
    print(f"  data.train_files={out / 'train.parquet'} data.val_files={out / 'test.parquet'} \\")
    print("  actor_rollout_ref.rollout.mode=async \\")
    print(f"  actor_rollout_ref.rollout.agent.agent_loop_config_path={loops} \\")
    print("  actor_rollout_ref.model.path=Qwen/Qwen3-4B ...   # the env's reward is the trajectory's score")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/verl"))
