"""Bash-v0: solve a seeded shell task in a container of your own."""

from __future__ import annotations

from agentrl.code_envs import bash_tasks
from agentrl.code_envs.base_env import SandboxEnv
from agentrl.code_envs.tasks import Task
from agentrl.code_envs.tools import ExecuteBashTool, FinishTool, ReadFileTool, WriteFileTool


# Tool mixins are listed last-first: tools are collected base-first along the MRO, so the agent
# sees execute_bash, read_file, write_file, finish in that order.
class BashEnv(FinishTool, WriteFileTool, ReadFileTool, ExecuteBashTool, SandboxEnv):
    """Files, logs, data, scripts, permissions and git tasks (see `bash_tasks`); reward 1 when the
    hidden checker accepts the final answer and workspace, else 0.

    Options: `reset(options={"task_id": "log_errors/3"})` picks a task; otherwise the seed does.
    """

    task_ids = bash_tasks.TASK_IDS

    @staticmethod
    def _get_task(task_id: str) -> Task:
        return bash_tasks.get_task(task_id)
