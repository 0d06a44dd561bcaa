"""Code-v0: write Python that passes hidden tests, with a notebook-like interpreter and a shell."""

from __future__ import annotations

from agentrl.code_envs import code_tasks
from agentrl.code_envs.base_env import SandboxEnv
from agentrl.code_envs.tools import ExecuteBashTool, FinishTool, RunPythonTool, WriteFileTool


# Listed last-first so the agent sees run_python, execute_bash, write_file, finish.
class CodeEnv(FinishTool, WriteFileTool, ExecuteBashTool, RunPythonTool, SandboxEnv):
    """Implement, fix or complete Python code that passes hidden tests.

    ## Description
    Tasks (`code_tasks`) are generated from the seed; each episode's starting code is uploaded into a
    fresh sandbox (a locked-down container), with a notebook-like Python interpreter and a shell. After
    `finish`, every process the agent started is killed, the candidate runs on hidden inputs and the
    host compares its outputs.

    ## Action Space
    Text (`TextSpace`): tool calls, `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, up to 8
    a turn, of `run_python` (cells that keep their variables), `execute_bash`, `write_file` and
    `finish(answer)`.

    ## Observation Space
    Text (`TextSpace`): first the task and the tools' JSON schemas, then each call's result (output and
    errors, trimmed to `max_output_bytes`) inside `<tool_response>` tags; a malformed call is answered
    with an error message.

    ## Rewards
    At the end: 1 when every hidden case passes, else 0; with `partial_credit=True`, the share of the
    hidden cases the starting code failed that now pass, minus regressions. `info` then carries
    `tests_passed` and `tests_total` of those counted cases, `score` and `solved`.

    ## Starting State
    `reset(seed=n, options={"family": ..., "split": ...})` plays task n of that family and split;
    without options the seed picks the family too. The first observation is the task's prompt;
    `info["task_id"]` names it (what it is only with `privileged_info=True`).

    ## Episode End
    - Termination: `finish` is called, or the sandbox stops working (reward 0, `info["error"]`).
    - Truncation: after `max_turns` steps (default 30); the code is judged as it is.

    ## Arguments
    `families` (all), `split` ("train"); the sandboxes: `sandbox_url` and `sandbox_token` (a sandbox
    server or cluster; default: Docker in process, with `pool_size` (2) containers started ahead),
    `image`, `memory_mb`; `command_timeout_s` (30), `max_output_bytes` (16,384) per tool result;
    `partial_credit` (False), `privileged_info` (False), `max_turns` (30), `render_mode`.
    """

    task_families = code_tasks.FAMILIES
