"""agentrl envs inside the RL frameworks people train with: TRL, SkyRL and verifiers.

Each adapter turns one agentrl env id, built in-process or served by `agentrl serve`, into that
framework's own env in one call:

- `agentrl.integrations.trl.environment_factory(...)` for `GRPOTrainer(environment_factory=...)`;
- `agentrl.integrations.skyrl.register(...)`, then `skyrl_gym.make(env_id, env_config, extras)`;
- the verifiers taskset `agentrl-verifiers` (module `agentrl_verifiers`), run by `vf-eval` or prime-rl.

A dataset row picks the episode (`seed`, `split`, `options`); the env's reward is the framework's
reward; every server-side episode is deleted when its rollout ends. The adapters import their
framework, so each lives in its own module behind its extra (`[trl]`, `[skyrl]`, `[verifiers]`).
"""
