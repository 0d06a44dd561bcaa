"""agent-train: a thin masked-GRPO trainer over async rollouts, token-in/token-out.

    agent-train --env agentrl/Flights-v0 --model smollm2 --group-size 8 --steps 50
    agent-train --config run.yaml --env-url http://127.0.0.1:8000   # episodes on an agentrl server

Read `train.py` top to bottom for the loop; `grpo.py` holds the objective, `transcript.py` the
token bookkeeping, `rollout.py` the per-episode workers and `backends.py` the generators.
"""
