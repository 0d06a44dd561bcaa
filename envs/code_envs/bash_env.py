"""Bash-v0: solve a generated shell task in a container of your own."""

from __future__ import annotations

from agentrl.code_envs import bash_tasks
from agentrl.code_envs.base_env import SandboxEnv
from agentrl.code_envs.tools import ExecuteBashTool, FinishTool, ReadFileTool, WriteFileTool


# Tool mixins are listed last-first: tools are collected base-first along the MRO, so the agent
# sees execute_bash, read_file, write_file, finish in that order.
class BashEnv(FinishTool, WriteFileTool, ReadFileTool, ExecuteBashTool, SandboxEnv):
    """Files, logs, data, scripts, permissions and git tasks (see `bash_tasks`, `bash_ops`); reward 1
    when the host-side check accepts the final answer and workspace, else 0.

    Options: `reset(seed=n, options={"family": "log_errors", "split": "test"})` plays task n of that
    family and split; without options the seed picks the family too.
    """

    task_families = bash_tasks.FAMILIES
