"""agent-train: a thin masked-GRPO trainer over async HTTP rollouts."""
