"""Code-v0: write Python that passes hidden tests, with a notebook-like interpreter and a shell."""

from __future__ import annotations

from agentrl.code_envs import code_tasks
from agentrl.code_envs.base_env import SandboxEnv
from agentrl.code_envs.tools import ExecuteBashTool, FinishTool, RunPythonTool, WriteFileTool


# Listed last-first so the agent sees run_python, execute_bash, write_file, finish.
class CodeEnv(FinishTool, WriteFileTool, ExecuteBashTool, RunPythonTool, SandboxEnv):
    """Implement, fix or complete Python code (see `code_tasks`). After `finish` the candidate runs on
    hidden inputs and the host compares its outputs; reward is 1 when every case passes, or with
    `partial_credit=True` the share of hidden cases the starting code failed that now pass (minus
    regressions). `info` carries tests_passed / tests_total of those counted cases.
    """

    task_families = code_tasks.FAMILIES
