"""agentrl envs inside the RL frameworks people train with: TRL, SkyRL, verifiers, verl, OpenRLHF,
AReaL and ROLL (through GEM).

Each adapter turns one agentrl env id, built in-process or served by `agentrl serve`, into that
framework's own env or rollout in one call:

- `agentrl.integrations.trl.environment_factory(...)` for `GRPOTrainer(environment_factory=...)`;
- `agentrl.integrations.skyrl.register(...)`, then `skyrl_gym.make(env_id, env_config, extras)`;
- the verifiers taskset `agentrl-verifiers` (module `agentrl_verifiers`), run by `vf-eval` or prime-rl;
- `agentrl.integrations.verl.AgentrlAgentLoop`, named in verl's agent-loop config file;
- `agentrl.integrations.openrlhf.agent_executor(...)`, the `AgentExecutor` of an `agent_func_path` file;
- `agentrl.integrations.areal.AgentrlWorkflow(...)`, an AReaL rollout workflow;
- `agentrl.integrations.gem.register(...)`, then `gem.make(env_id, ...)` (ROLL's env interface).

A dataset row picks the episode (`seed`, `split`, `options`); the env's reward is the framework's
reward; every server-side episode is deleted when its rollout ends. The adapters that hand a trainer
token ids (verl, OpenRLHF, AReaL) share `tokens`, agent-train's rule: generated ids trained as
sampled, everything the env and the chat template add masked. The adapters import their framework,
so each lives in its own module behind its extra.
"""
