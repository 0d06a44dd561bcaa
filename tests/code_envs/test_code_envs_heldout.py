"""Code-v0's test split is held out in behaviour, not only in wording (no Docker).

300 train and 300 test tasks per family: every train reference function is called, in this process
and under a per-call time limit, on the hidden cases of every test function (`code_envs_distribution
.cross`), and none returns every expected output; module_suite test functions share no function with
train module_suite; no fix_bug test task asks for a fix a train task asks for; composed specs carry no
step that changes nothing.
"""

from __future__ import annotations

import random
import re
from functools import cache

import pytest
from code_envs_distribution import cross, draw, fix_of, graded_cases, passing_references, reference_functions

from agentrl.code_envs import code_tasks
from agentrl.code_envs.code_pipelines import Step, has_idle_step, number_pipeline, text_pipeline
from agentrl.code_envs.code_probes import probes
from agentrl.code_envs.code_specs import SPECS, Spec, canonical, moving_average, run
from agentrl.code_envs.tasks import Task, content_split, generate

SAMPLE = 300  # tasks per family and split
SOLVED = "test tasks with a function a train reference solves"
DOMAINS = ("text", "count", "ints", "intervals", "nested", "words")
ROTATE = Step("rotate left by 2", "xs = xs[2 % len(xs):] + xs[:2 % len(xs)] if xs else xs", ())
KEEP_EVEN = Step("keep the even numbers", "xs = [x for x in xs if x % 2 == 0]", ())


@cache
def tasks(split: str) -> dict[str, list[Task]]:
    return draw(split, SAMPLE)


@cache
def figures() -> dict[str, dict[str, float]]:
    return cross(tasks("train"), tasks("test"))


@pytest.mark.slow
@pytest.mark.parametrize("family", code_tasks.FAMILIES)
def test_no_train_reference_passes_every_hidden_case_of_a_test_task(family):
    assert figures()[family][SOLVED] == 0, figures()


@pytest.mark.slow
def test_module_suite_test_tasks_share_no_function_with_train_module_suite():
    references = [f for t in tasks("train")["module_suite"] for f in reference_functions(t)]
    functions = [cases for t in tasks("test")["module_suite"] for cases in graded_cases(t).values()]
    assert len(references) == len(functions) == 3 * SAMPLE
    hits = passing_references(references, functions)
    assert not any(hits), sum(map(bool, hits))


@pytest.mark.slow
def test_fix_bug_test_tasks_ask_for_no_train_fix():
    train = {fix_of(t) for t in tasks("train")["fix_bug"]}
    test = [fix_of(t) for t in tasks("test")["fix_bug"]]
    assert not train & set(test)
    assert len(set(test)) >= SAMPLE // 4  # many distinct fixes, not a handful


def test_the_cross_check_finds_a_reference_that_solves_a_test_task():
    """The measure above can fail: a test task's own reference passes its cases (it is called as a
    function object, so its name plays no part), and neither a wrong function nor one that never
    returns does."""
    task = generate("implement", code_tasks.implement, "test", 0)
    (cases,) = graded_cases(task).values()
    (own,) = reference_functions(task)

    def forever(*_):
        while True:
            pass

    assert passing_references([forever, lambda *args: args[0], own], [cases, cases]) == [{2}, {2}]


@pytest.mark.parametrize("family", code_tasks.FAMILIES)
def test_test_tasks_grade_every_probe_of_their_functions_domain_and_train_tasks_none(family):
    """What makes the cross check hold: a train function passing a test function's cases returns its
    outputs on every probe, so it has its fingerprint, hence its split."""
    domains = {d: {canonical(list(args)) for args in probes(d)} for d in DOMAINS}
    for index in range(40):
        for function, cases in graded_cases(
            generate(family, code_tasks.FAMILIES[family], "test", index)
        ).items():
            graded = {args for args, _ in cases}
            assert any(keys <= graded for keys in domains.values()), function
        train = generate(family, code_tasks.FAMILIES[family], "train", index)
        graded = {args for cases in graded_cases(train).values() for args, _ in cases}
        assert not graded & set().union(*domains.values())


def test_probes_are_test_inputs_on_which_every_reference_returns_a_value():
    rng = random.Random(0)
    for maker in (*SPECS, number_pipeline, text_pipeline):
        for _ in range(40):
            spec = maker(rng)
            assert spec.domain in DOMAINS and len(probes(spec.domain)) >= 12
            assert all(content_split("case", canonical(list(args))) == "test" for args in probes(spec.domain))
            outputs = run(spec.source, spec.name, probes(spec.domain))
            assert not [o for o in outputs if isinstance(o, dict) and "raised" in o], spec.source


def without_line(spec: Spec, line: str) -> list:
    return run(spec.source.replace(line, "", 1), spec.name, probes(spec.domain))


def test_composed_specs_have_no_step_that_changes_nothing():
    """Leaving out any one step of a drawn composed spec changes what it returns on the probes (so
    'rotate the list left by 2; then return the sum' is never drawn)."""
    rng = random.Random(1)
    for maker in (number_pipeline, text_pipeline):
        for _ in range(300):
            spec = maker(rng)
            whole = run(spec.source, spec.name, probes(spec.domain))
            steps = spec.source.splitlines(keepends=True)[
                2:-1
            ]  # between the copy of the argument and the return
            assert steps
            for line in steps:
                assert without_line(spec, line) != whole, (spec.doc, line)


def test_idle_steps_are_found():
    assert has_idle_step([ROTATE], "return sum(xs)", "xs", "ints")
    assert has_idle_step([ROTATE, KEEP_EVEN], "return max(xs) if xs else None", "xs", "ints")
    assert not has_idle_step([ROTATE], "return xs", "xs", "ints")
    assert not has_idle_step([KEEP_EVEN], "return sum(xs)", "xs", "ints")


def test_window_averages_are_rounded_to_no_more_decimals_than_they_have():
    """Averages of 2 integers have one decimal at most: 'rounded to 3 decimals' would be a new doc of
    the same function, so every drawn number of decimals changes some output when one fewer is used."""
    rng = random.Random(2)
    for _ in range(200):
        spec = moving_average(rng)
        digits = int(re.search(r", (\d)\) for ", spec.source).group(1))
        if digits > 1:
            fewer = spec.source.replace(f", {digits}) for ", f", {digits - 1}) for ")
            inputs = probes(spec.domain) + spec.inputs
            assert run(fewer, spec.name, inputs) != run(spec.source, spec.name, inputs), spec.doc
