"""The task catalogues as data: enough tasks, stable ids, deterministic worlds, hidden checks."""

from __future__ import annotations

import json

import pytest

from agentrl.code_envs import bash_tasks, code_tasks
from agentrl.code_envs.tools import clip_bytes
from agentrl.code_envs.workspace import tar_bytes


@pytest.mark.parametrize("tasks, families", [(bash_tasks, 6), (code_tasks, 3)])
def test_catalogue_has_at_least_sixty_tasks_in_families(tasks, families):
    assert len(tasks.TASK_IDS) >= 60
    assert len(set(tasks.TASK_IDS)) == len(tasks.TASK_IDS)
    assert len({t.split("/")[0] for t in tasks.TASK_IDS}) >= families


@pytest.mark.parametrize("tasks", [bash_tasks, code_tasks])
def test_same_task_id_builds_the_same_world(tasks):
    for task_id in tasks.TASK_IDS:
        a, b = tasks.get_task(task_id), tasks.get_task(task_id)
        assert a.task_id == task_id
        assert a.prompt == b.prompt and a.setup == b.setup and a.solution == b.solution
        assert a.setup_stdin == b.setup_stdin
        assert tar_bytes(a.workspace) == tar_bytes(b.workspace)


@pytest.mark.parametrize("tasks", [bash_tasks, code_tasks])
def test_variants_of_a_family_differ(tasks):
    by_family: dict[str, set[bytes]] = {}
    for task_id in tasks.TASK_IDS:
        task = tasks.get_task(task_id)
        by_family.setdefault(task.family, set()).add(
            tar_bytes(task.workspace)
            + (task.prompt + task.setup + str(task.setup_stdin) + str(task.meta)).encode()
        )
    for family, worlds in by_family.items():
        assert len(worlds) >= 0.8 * sum(1 for t in tasks.TASK_IDS if t.startswith(family + "/")), family


def test_unknown_task_ids_are_refused():
    for tasks in (bash_tasks, code_tasks):
        for bad in ("nope/1", "count_files", "implement/999", ""):
            with pytest.raises(KeyError):
                tasks.get_task(bad)


def test_code_hidden_tests_never_enter_the_workspace():
    for task_id in code_tasks.TASK_IDS:
        task = code_tasks.get_task(task_id)
        names = " ".join(task.workspace)
        assert "grade" not in names and "hidden" not in names and "cases" not in names
        text = "".join(f.data().decode() for f in task.workspace.values())
        assert code_tasks.GRADER_DIR not in text and code_tasks.GRADER_DIR not in task.prompt


def test_fix_bug_workspace_is_broken_and_reference_differs():
    for task_id in (t for t in code_tasks.TASK_IDS if t.startswith("fix_bug/")):
        task = code_tasks.get_task(task_id)
        written = dict(task.solution[1][1])
        assert task.workspace["solution.py"].data().decode() != written["content"]


def test_reference_solutions_are_valid_tool_calls():
    from agentrl.code_envs.bash_env import BashEnv
    from agentrl.code_envs.code_env import CodeEnv

    for env_cls, tasks in ((BashEnv, bash_tasks), (CodeEnv, code_tasks)):
        for task_id in tasks.TASK_IDS:
            solution = tasks.get_task(task_id).solution
            assert solution[-1][0] == "finish"
            for name, arguments in solution:
                env_cls.tools[name].validate(json.loads(json.dumps(arguments)))


def test_clip_bytes_reports_byte_counts():
    text = "é" * 10_000  # 2 bytes each
    clipped, cut = clip_bytes(text, 1000)
    assert cut and "of 20000 bytes truncated" in clipped
    assert len(clipped.encode()) < 1200
    assert clip_bytes("short", 1000) == ("short", False)


def test_envs_are_registered_and_construct_without_docker():
    import gymnasium as gym

    import agentrl  # noqa: F401

    for env_id in ("agentrl/Bash-v0", "agentrl/Code-v0"):
        env = gym.make(env_id)  # no container until reset
        assert env.unwrapped.sandbox is None
        env.close()
    with pytest.raises(KeyError):
        gym.make("agentrl/Bash-v0", task_id="nope/0")
