"""The verifiers plugin `agentrl-verifiers`: verifiers imports a taskset by its top-level module name,
so this package re-exports `agentrl.integrations.verifiers` (taskset, env and default harness)."""

from agentrl.integrations.verifiers import (
    AgentrlChatConfig,
    AgentrlChatHarness,
    AgentrlEnv,
    AgentrlEnvConfig,
    AgentrlTask,
    AgentrlTaskData,
    AgentrlTaskset,
    AgentrlTasksetConfig,
)

__all__ = ["AgentrlChatConfig", "AgentrlChatHarness", "AgentrlEnv", "AgentrlEnvConfig", "AgentrlTask",
           "AgentrlTaskData", "AgentrlTaskset", "AgentrlTasksetConfig"]
