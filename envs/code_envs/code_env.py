"""Code-v0: write Python that passes hidden tests, with a notebook-like interpreter and a shell."""

from __future__ import annotations

from agentrl.code_envs import code_tasks
from agentrl.code_envs.base_env import SandboxEnv
from agentrl.code_envs.tasks import Task
from agentrl.code_envs.tools import ExecuteBashTool, FinishTool, RunPythonTool, WriteFileTool


# Listed last-first so the agent sees run_python, execute_bash, write_file, finish.
class CodeEnv(FinishTool, WriteFileTool, ExecuteBashTool, RunPythonTool, SandboxEnv):
    """Implement, fix or complete Python code (see `code_tasks`). After `finish`, hidden tests run in
    the sandbox; reward is 1 when all pass (or the fraction passed with `partial_credit=True`);
    `info` always carries tests_passed / tests_total.
    """

    task_ids = code_tasks.TASK_IDS

    @staticmethod
    def _get_task(task_id: str) -> Task:
        return code_tasks.get_task(task_id)
