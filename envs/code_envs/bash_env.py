"""Bash-v0: solve a generated shell task in a container of your own."""

from __future__ import annotations

from agentrl.code_envs import bash_tasks
from agentrl.code_envs.base_env import SandboxEnv
from agentrl.code_envs.tools import ExecuteBashTool, FinishTool, ReadFileTool, WriteFileTool


# Tool mixins are listed last-first: tools are collected base-first along the MRO, so the agent
# sees execute_bash, read_file, write_file, finish in that order.
class BashEnv(FinishTool, WriteFileTool, ReadFileTool, ExecuteBashTool, SandboxEnv):
    """Solve a generated shell task in a container of one's own.

    ## Description
    Tasks on files, logs, data, scripts, permissions and git (`bash_tasks`, `bash_ops`) are generated
    from the seed; each episode's workspace is uploaded into a fresh sandbox (a locked-down container).
    When the episode ends, every process the agent started is killed and the task's check, run on the
    host from facts gathered in the container, judges the answer and the workspace.

    ## Action Space
    Text (`TextSpace`): tool calls, `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, up to 8
    a turn, of `execute_bash`, `read_file`, `write_file` and `finish(answer)`.

    ## Observation Space
    Text (`TextSpace`): first the task and the tools' JSON schemas, then each call's result (a command's
    exit status, stdout and stderr, trimmed to `max_output_bytes`) inside `<tool_response>` tags; a
    malformed call is answered with an error message.

    ## Rewards
    At the end: 1 when the check accepts the final answer and workspace, else 0; with
    `partial_credit=True`, the share of the check's parts that hold. `info` then carries `tests_passed`,
    `tests_total`, `score` and `solved`.

    ## Starting State
    `reset(seed=n, options={"family": "log_errors", "split": "test"})` plays task n of that family and
    split; without options the seed picks the family too. The first observation is the task's prompt;
    `info["task_id"]` names it (what it is only with `privileged_info=True`).

    ## Episode End
    - Termination: `finish` is called, or the sandbox stops working (reward 0, `info["error"]`).
    - Truncation: after `max_turns` steps (default 30); the workspace is judged as it is.

    ## Arguments
    `families` (all), `split` ("train"); the sandboxes: `sandbox_url` and `sandbox_token` (a sandbox
    server or cluster; default: Docker in process, with `pool_size` (2) containers started ahead),
    `image`, `memory_mb`; `command_timeout_s` (30), `max_output_bytes` (16,384) per tool result;
    `partial_credit` (False), `privileged_info` (False), `max_turns` (30), `render_mode`.
    """

    task_families = bash_tasks.FAMILIES
