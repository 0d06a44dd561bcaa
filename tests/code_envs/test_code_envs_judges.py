"""Every family's judge, and the workspace listing forks compare, read junk from the container
without raising (no Docker).

What the checks read back is the agent's to shape. Here the container is a stand-in whose every
command prints what hypothesis draws: arbitrary text, report lines carrying the runner's nonce with
junk case numbers ('²'), flags and values (5,000-deep JSON, NaN, 5,000-digit numbers). Each family's
check must return a grade; a report that does not parse scores 0 and says why. The same attacks on
the real engine are in test_code_envs_hacks.py.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentrl.code_envs import bash_tasks, code_tasks
from agentrl.code_envs.code_tasks import read_report
from agentrl.code_envs.judge import MalformedReport, parse_index, parse_json
from agentrl.code_envs.tasks import Grade, Task, generate
from agentrl.code_envs.workspace import changes, listing
from agentrl.sandbox_server import ExecResult

FAMILIES = {**bash_tasks.FAMILIES, **code_tasks.FAMILIES}
NONCE = "0123456789abcdef"
DEEP = "[" * 5000 + "]" * 5000


@cache
def task(family: str, seed: int) -> Task:
    return generate(family, FAMILIES[family], "test", seed)


class JunkContainer:
    """A container whose every command prints `stdout`; `NONCE` in it becomes the nonce the code
    runner was given, so junk lines look like the runner's own."""

    def __init__(self, stdout: str, status: str = "ok", truncated: bool = False) -> None:
        self.stdout, self.status, self.truncated = stdout, status, truncated
        self.commands: list[str] = []

    def exec(self, command: str, **_: Any) -> ExecResult:
        self.commands.append(command)
        nonce = re.search(r" ([0-9a-f]{16}) [0-9]+ [0-9]+$", command)
        text = self.stdout.replace("NONCE", nonce.group(1)) if nonce else self.stdout
        return ExecResult(
            status=self.status,
            exit_code=0 if self.status == "ok" else 1,
            stdout=text,
            stderr="",
            stdout_bytes=len(text.encode()),
            stderr_bytes=0,
            truncated=self.truncated,
            duration_ms=1.0,
        )

    def run_code(self, code: str, language: str = "python", **kwargs: Any) -> ExecResult:
        return self.exec(code, **kwargs)


json_junk = st.one_of(
    st.integers(0, 6000).map(lambda d: "[" * d + "]" * d),
    st.integers(0, 6000).map(lambda d: '{"a": ' * d + "1" + "}" * d),
    st.sampled_from(["NaN", "-Infinity", "1e999", "9" * 5000, "1" * 70 + ".5", "[1,", '"\\ud800"', "", DEEP]),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
        max_leaves=20,
    ).map(json.dumps),
    st.text(max_size=40),
)
index_junk = st.one_of(
    st.integers(-3, 60).map(str), st.sampled_from(["²", "٣", "1²", "00", "", "9" * 40]), st.text(max_size=4)
)
report_line = st.builds(
    lambda index, flag, value: f"NONCE {index} {flag} {value}",
    index_junk,
    st.sampled_from(["0", "1", "2", "", "\uff11"]),
    json_junk,
)
junk_output = st.lists(st.one_of(report_line, json_junk, st.text(max_size=60)), max_size=12).map("\n".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    family=st.sampled_from(sorted(FAMILIES)),
    seed=st.integers(0, 2),
    stdout=junk_output,
    status=st.sampled_from(["ok", "ok", "error", "timeout", "killed"]),
    truncated=st.booleans(),
    answer=st.one_of(st.none(), st.text(max_size=30), json_junk),
)
@example(family="implement", seed=0, stdout=f"NONCE 0 1 {DEEP}", status="ok", truncated=False, answer="")
@example(family="fix_bug", seed=0, stdout="NONCE ² 1 0", status="ok", truncated=False, answer="")
@example(family="module_suite", seed=1, stdout="NONCE 0 1 NaN", status="ok", truncated=False, answer="")
@example(family="csv_to_json", seed=0, stdout=DEEP, status="ok", truncated=False, answer="")
@example(family="csv_aggregate", seed=0, stdout=DEEP, status="ok", truncated=False, answer="")
def test_no_junk_from_the_container_makes_a_judge_raise(family, seed, stdout, status, truncated, answer):
    grade = task(family, seed).check(JunkContainer(stdout, status, truncated), answer)
    assert isinstance(grade, Grade) and 0.0 <= grade.score <= 1.0
    if grade.malformed:
        assert grade.score == 0.0 and not grade.solved and grade.passed == 0


@pytest.mark.parametrize(
    ("family", "stdout", "reason"),
    [
        ("implement", f"NONCE 0 1 {DEEP}", "deeper than 64"),
        ("fix_bug", "NONCE ² 1 0", "case number '²'"),
        ("module_suite", "NONCE 0 1 1e999", "out of range"),
        ("implement", "NONCE 0 7 []", "neither 0 nor 1"),
        ("csv_to_json", DEEP, "deeper than 64"),
        ("csv_aggregate", '{"a": NaN}', "NaN is not a JSON value"),
    ],
)
def test_a_malformed_report_scores_zero_and_says_why(family, stdout, reason):
    grade = task(family, 0).check(JunkContainer(stdout), "")
    assert grade.score == 0.0 and reason in grade.malformed, grade


def test_parse_json_bounds_depth_size_and_numbers():
    assert parse_json('{"a": [1, 2.5, "[[[["], "b": null}') == {"a": [1, 2.5, "[[[["], "b": None}
    assert parse_json("[" * 64 + "]" * 64) == json.loads("[" * 64 + "]" * 64)
    for bad in (DEEP, "[" * 65 + "]" * 65, "NaN", "Infinity", "1e400", "1" * 65, "[1,", "'a'"):
        with pytest.raises(MalformedReport):
            parse_json(bad)
    with pytest.raises(MalformedReport, match="over the 10"):
        parse_json("[" + "1," * 10 + "1]", max_chars=10)


def test_case_numbers_are_ascii_digits_below_the_count():
    assert parse_index("0", 3) == 0 and parse_index("12", 13) == 12
    for bad in ("²", "\u0661", "-1", "3", "", " 1", "1e0", "9" * 40):
        with pytest.raises(MalformedReport):
            parse_index(bad, 3)


def test_a_report_keeps_other_lines_out_and_fails_a_case_claimed_twice():
    lines = [
        f"{NONCE} 0 1 [1, 2]",
        "stray print 1 1 1",
        f'{NONCE} 1 0 "ValueError"',
        f"{NONCE} 2 1 3",
        f"{NONCE} 2 1 3",
        f"other {NONCE} 3 1 4",
    ]
    assert read_report("\n".join(lines), NONCE, 4) == ["[1, 2]", None, None, None]


@settings(max_examples=200, deadline=None)
@given(stdout=junk_output, status=st.sampled_from(["ok", "error", "timeout"]), truncated=st.booleans())
def test_a_junk_workspace_listing_never_raises(stdout, status, truncated):
    """The listing a fork compares is container output too: junk gives a listing or a reason."""
    before = listing(JunkContainer(stdout, status, truncated))
    after = listing(JunkContainer(stdout.replace("\t", "\0", 1), status, truncated))
    assert isinstance(before, (dict, str)) and json.dumps(changes(before, after))


def test_a_listing_reads_kinds_modes_links_and_hashes():
    stdout = "d755\t\t.\0f644\t\t./a b.txt\0l777\tz\t./link\0" + "0" * 64 + "  ./a b.txt\0"
    assert listing(JunkContainer(stdout)) == {".": "d755", "a b.txt": "f644:" + "0" * 16, "link": "l777:z"}
    assert changes({"a": "f644:1", "b": "d755"}, {"a": "f644:2", "c": "d700"}) == {
        "changed": {"a": "f644:2", "b": None, "c": "d700"}
    }
