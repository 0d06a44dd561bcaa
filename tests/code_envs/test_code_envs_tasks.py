"""The generated task space as data (no Docker): determinism, variety, disjoint splits (by fingerprint,
and for Code-v0 by content), opaque ids, hidden cases that stay hidden, and reference solutions that
are valid tool calls."""

from __future__ import annotations

import json
import re
from functools import cache

import pytest
from code_envs_distribution import hidden_inputs, measure, programs_of, specs_of

from agentrl.code_envs import bash_tasks, code_tasks
from agentrl.code_envs.bash_env import BashEnv
from agentrl.code_envs.code_env import CodeEnv
from agentrl.code_envs.tasks import Task, generate, split_of
from agentrl.code_envs.tools import clip_bytes
from agentrl.code_envs.workspace import tar_bytes

FAMILIES = {**bash_tasks.FAMILIES, **code_tasks.FAMILIES}
SAMPLE = 1000  # seeds per family for the repetition and split checks


@cache
def sample(family: str, split: str, n: int) -> tuple[Task, ...]:
    return tuple(generate(family, FAMILIES[family], split, i) for i in range(n))


def test_families_of_each_env():
    assert set(BashEnv.task_families) == set(bash_tasks.FAMILIES) and len(BashEnv.task_families) == 9
    assert set(CodeEnv.task_families) == {"implement", "fix_bug", "module_suite"}


@pytest.mark.parametrize("family", FAMILIES)
def test_same_family_split_and_index_build_the_same_task(family):
    for index in (0, 7, 123456789):
        a, b = (generate(family, FAMILIES[family], "train", index) for _ in range(2))
        assert (a.task_id, a.prompt, a.setup, a.setup_stdin, a.solution) == (
            b.task_id,
            b.prompt,
            b.setup,
            b.setup_stdin,
            b.solution,
        )
        assert tar_bytes(a.workspace) == tar_bytes(b.workspace)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_prompts_rarely_repeat(family):
    prompts = [t.prompt for t in sample(family, "train", SAMPLE)]
    repeated = 1 - len(set(prompts)) / len(prompts)
    assert repeated <= 0.05, f"{family}: {repeated:.1%} of {SAMPLE} prompts are repeats"


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_train_and_test_are_disjoint_by_construction(family):
    train, test = sample(family, "train", SAMPLE), sample(family, "test", SAMPLE // 8)
    # the split is a function of what the agent sees, so no task can be in both
    assert all(split_of(t.fingerprint()) == "train" == t.split for t in train)
    assert all(split_of(t.fingerprint()) == "test" == t.split for t in test)
    assert not {t.task_id for t in train} & {t.task_id for t in test}
    assert not {t.fingerprint() for t in train} & {t.fingerprint() for t in test}


@pytest.mark.slow
def test_code_test_tasks_are_new_in_content():
    """Over 1,000 tasks per family and split: no test spec, program or hidden case was seen in train,
    and `implement` draws far more distinct specs than a fixed list of templates would."""
    train = {f: list(sample(f, "train", SAMPLE)) for f in code_tasks.FAMILIES}
    test = {f: list(sample(f, "test", SAMPLE)) for f in code_tasks.FAMILIES}
    figures = measure(train, test)
    print(figures)
    for family, row in figures.items():
        assert row["test tasks with a spec seen in train"] == 0, (family, row)
        assert row["test tasks with a program seen in train"] == 0, (family, row)
        assert row["test hidden cases seen in train"] == 0, (family, row)
    assert figures["implement"]["distinct specs (train)"] >= 600, figures["implement"]
    assert figures["implement"]["distinct specs (test)"] >= 600, figures["implement"]


def test_the_content_measure_sees_what_a_task_is_made_of():
    """The measure above reads specs, programs and hidden cases back from what each task shows, so it
    must find them: one per function, the starting and reference programs, every graded call."""
    for family, functions in (("implement", 1), ("fix_bug", 1), ("module_suite", 3)):
        task = sample(family, "test", 5)[0]
        assert len(specs_of(task)) == functions and specs_of(task) == set(task.meta["specs"])
        assert len(programs_of(task)) == 2 * functions
        assert hidden_inputs(task) == task.meta["inputs"] and len(hidden_inputs(task)) == task.meta["cases"]


@pytest.mark.parametrize("family", FAMILIES)
def test_task_ids_are_opaque_and_name_the_visible_task(family):
    tasks = sample(family, "train", 50)
    assert all(re.fullmatch(r"[0-9a-f]{16}", t.task_id) for t in tasks)
    assert all(t.task_id == t.fingerprint()[:16] for t in tasks)
    by_id = {t.task_id: t.prompt + t.setup + str(t.setup_stdin) for t in tasks}
    assert len(by_id) == len(
        {t.prompt + t.setup + str(t.setup_stdin) + str(tar_bytes(t.workspace)) for t in tasks}
    )
    assert all(family not in t.task_id for t in tasks)


@pytest.mark.parametrize("family", code_tasks.FAMILIES)
def test_code_tasks_keep_at_least_two_failing_cases_hidden(family):
    for task in sample(family, "train", 200):
        assert task.meta["counted"] >= 2  # hidden cases the starting code fails
        visible = "".join(f.data().decode() for p, f in task.workspace.items() if p.startswith("tests/"))
        assert visible.count("def test_") < task.meta["cases"]


def test_fix_bug_workspace_is_broken_and_reference_differs():
    for task in sample("fix_bug", "train", 100):
        assert task.workspace["solution.py"].data().decode() != dict(task.solution[1][1])["content"]


def test_nothing_graded_is_in_the_workspace_or_prompt():
    for family in FAMILIES:
        for task in sample(family, "train", 30):
            text = task.prompt + "".join(f.data().decode() for f in task.workspace.values())
            assert ".agentrl" not in text and "expected" not in text.lower()
            if task.answer is not None:  # a question's answer is never written down for the agent
                assert f" {task.answer} " not in f" {task.prompt} " or family == "find_token"


def test_reference_solutions_are_valid_tool_calls():
    for env_cls in (BashEnv, CodeEnv):
        for family in env_cls.task_families:
            for task in sample(family, "train", 20):
                assert task.solution[-1][0] == "finish"
                for name, arguments in task.solution:
                    env_cls.tools[name].validate(json.loads(json.dumps(arguments)))


def test_unknown_families_splits_and_options_are_refused():
    with pytest.raises(ValueError, match="family"):
        BashEnv(families=["nope"])
    with pytest.raises(ValueError, match="split"):
        CodeEnv(split="validation")
    with pytest.raises(ValueError, match="split"):
        generate("implement", code_tasks.implement, "dev", 0)
    env = BashEnv()
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(seed=0, options={"task_id": "count_files/1"})
    with pytest.raises(ValueError, match="family"):
        env.reset(seed=0, options={"family": "implement"})
    env.close()


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
        assert "privileged_info" in env.unwrapped.operator_kwargs
        env.close()
