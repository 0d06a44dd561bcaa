"""Every task's reference solution scores 1.0 and doing nothing (or the wrong thing) scores 0, on the
real Docker engine."""

from __future__ import annotations

import random

import pytest
from code_envs_helpers import call, play, play_reference

from agentrl.code_envs import bash_tasks, code_specs, code_tasks

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.mark.parametrize("task_id", bash_tasks.TASK_IDS)
def test_bash_reference_solves_and_doing_nothing_fails(bash_env, task_id):
    reward, info, _ = play_reference(bash_env, task_id, env_id="agentrl/Bash-v0")
    assert reward == 1.0, info
    assert info["solved"] is True
    reward, info = play(bash_env, task_id, [call("finish", answer="")])
    assert reward == 0.0, info
    assert info["solved"] is False


@pytest.mark.parametrize("task_id", code_tasks.TASK_IDS)
def test_code_reference_solves_and_wrong_code_fails(code_env, task_id):
    reward, info, _ = play_reference(code_env, task_id, env_id="agentrl/Code-v0")
    assert reward == 1.0, info
    assert info["tests_passed"] == info["tests_total"] > 0
    # doing nothing: stubs raise, buggy code fails at least one hidden test
    reward, info = play(code_env, task_id, [call("finish")])
    assert reward == 0.0, info
    # a wrong implementation of every function
    task = code_tasks.get_task(task_id)
    module = "mylib.py" if task.family == "module_suite" else "solution.py"
    names = [make(random.Random(0)).name for make in code_specs.SPECS]
    wrong = "".join(f"def {n}(*args, **kwargs):\n    return None\n\n" for n in names)
    reward, info = play(code_env, task_id, [call("write_file", path=module, content=wrong), call("finish")])
    assert reward == 0.0 and info["tests_passed"] == 0, info
