"""Flights-v0 in OpenRLHF: this file is the agent file its PPO trainer loads with `agent_func_path`.

OpenRLHF imports it in each vLLM rollout actor and builds `AgentExecutor()`; each sample's label
(JSON: `{"seed": 3, "split": "train"}`) picks the episode, the env's reward is the sample's reward.
Serve the env (`agentrl serve`), then (`pip install -e '.[openrlhf]'` on the GPU machine that trains):

    AGENTRL_URL=http://127.0.0.1:8000 python -m openrlhf.cli.train_ppo_ray \\
        --train.agent_func_path examples/openrlhf_agent.py --data.label_key label ...
"""

import os

from agentrl.integrations.openrlhf import agent_executor

AgentExecutor = agent_executor("agentrl/Flights-v0", base_url=os.environ.get("AGENTRL_URL", "http://127.0.0.1:8000"))
