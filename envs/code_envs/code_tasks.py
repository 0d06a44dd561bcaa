"""Code-v0's task families: implement a function, fix a bug that a test exposes, and make a small
module pass its test suite, all drawn from `code_specs`.

Grading happens on the host. After `finish` (and after every process of the agent is gone) one
one-shot exec runs `RUNNER` with a clean environment: it receives only the hidden inputs on stdin,
calls the candidate and prints each output. The expected outputs never enter the container; the
host compares. A candidate that forges, kills or hijacks the runner can only make its own outputs
missing or wrong.

Partial credit counts progress only: a case counts when it is hidden (not in the visible tests), the
starting code fails it, and its expected output is not one a stub gets without computing anything (an
argument, or a constant such as None, 0, 1, -1, '', [] or True: `TRIVIAL`). So doing nothing,
returning an argument or a constant, or special-casing the shown inputs earns nothing, and cases the
starting code passed but the final code fails are subtracted.

Test tasks are new in behaviour, not only in fingerprint: every spec belongs to one split by what it
computes (`code_probes.behaviour_split`, a hash of its outputs on fixed probe inputs), every test
input and every fix_bug fix (the lines to change, names normalised) by a hash of its text
(`tasks.content_split`), and `draw_spec` draws each task's parts from its own split's share only. Test
tasks also grade every function on its domain's probes, so no train function passes a test
function's hidden cases (see `code_probes`).
"""

from __future__ import annotations

import json
import random
import secrets
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentrl.code_envs.code_pipelines import number_pipeline, text_pipeline
from agentrl.code_envs.code_probes import behaviour_split, fix_of, with_probes
from agentrl.code_envs.code_specs import SPECS, Spec, canonical, normalize_doc, normalize_program, run
from agentrl.code_envs.judge import CHECK_TIMEOUT_S, MalformedReport, oneshot, parse_index, parse_json
from agentrl.code_envs.tasks import Builder, Grade, Redraw, Task, call, content_split, malformed
from agentrl.code_envs.workspace import files

if TYPE_CHECKING:
    from agentrl.sandbox_server import Sandbox

CASE_TIMEOUT_S = 2
MAX_RESULT_CHARS = 1 << 16  # of one case's output; every expected output is far shorter
# Outputs a stub earns without computing anything (besides its arguments): never counted.
TRIVIAL = (None, True, False, 0, 1, -1, "", [], {})
TRIVIAL_JSON = frozenset(canonical(v) for v in TRIVIAL)
# Spec makers: every hand-written builder once, and the composed ones twice as often as all of those.
MAKERS = (*SPECS, *(number_pipeline, text_pipeline) * len(SPECS))
MAX_SPEC_DRAWS = 500  # a draw is in the split with probability 1/2: never reached
# A fixed environment for the candidate: nothing inherited, a fixed hash seed (set iteration order
# is then the same as in `run_python`), no user site-packages, no cwd on sys.path but the workspace.
PYTHON = "env -i PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 PYTHONHASHSEED=0 python3 -s -P -B"
RUNNER = r"""
import importlib, json, os, signal, sys
dumps = json.dumps  # bound before any candidate code runs
nonce, timeout, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
jobs = json.loads(sys.stdin.read())
report = os.fdopen(os.dup(1), "w")
quiet = os.open(os.devnull, os.O_RDWR)
os.dup2(quiet, 0)
os.dup2(quiet, 1)
sys.path.insert(0, os.getcwd())
def alarm(*_):
    raise TimeoutError("case timed out")
signal.signal(signal.SIGALRM, alarm)
for i, (module, function, args) in enumerate(jobs):
    try:
        signal.alarm(timeout)
        value = getattr(importlib.import_module(module), function)(*args)
        result, ok = dumps(value, sort_keys=True, allow_nan=False), 1
    except BaseException as exc:
        result, ok = dumps(type(exc).__name__), 0
    finally:
        signal.alarm(0)
    if len(result) > limit:
        result, ok = dumps("OutputTooLarge"), 0
    report.write("%s %d %d %s\n" % (nonce, i, ok, result.replace("\n", " ")))
    report.flush()
"""


def read_report(stdout: str, nonce: str, count: int) -> list[str | None]:
    """Each case's output in the runner's report (canonical JSON; None when the case failed, or when
    two lines claim it). Lines without the nonce are not the runner's and are skipped; a line with
    it that does not parse (case number, flag, bounded JSON) makes the whole report MalformedReport."""
    got: dict[int, str | None] = {}
    for line in stdout.splitlines():
        tag, index, ok, result = [*line.split(" ", 3), "", "", ""][:4]
        if tag != nonce:
            continue
        i = parse_index(index, count)
        if ok not in ("0", "1"):
            raise MalformedReport(f"case {i}: flag {ok[:20]!r} is neither 0 nor 1")
        value = canonical(parse_json(result, max_chars=MAX_RESULT_CHARS)) if ok == "1" else None
        got[i] = None if i in got else value  # a second line for one case makes it fail
    return [got.get(i) for i in range(count)]


def outputs_of(sandbox: Sandbox, jobs: list[list[Any]]) -> list[str | None]:
    """The candidate's output for each job, from one run of RUNNER (see `read_report`)."""
    nonce = secrets.token_hex(8)
    out = oneshot(
        sandbox,
        f"{PYTHON} -c {shlex.quote(RUNNER)} {nonce} {CASE_TIMEOUT_S} {MAX_RESULT_CHARS}",
        stdin=json.dumps(jobs),
        timeout_s=CHECK_TIMEOUT_S + CASE_TIMEOUT_S * len(jobs),
    )
    if out.truncated:
        raise MalformedReport(f"the report ran over {out.stdout_bytes} bytes")
    return read_report(out.stdout, nonce, len(jobs))


def hidden_tests(
    module: str, specs: list[Spec], shown: set[int], start: list[list[Any]], wants: list[list[Any]]
) -> tuple[Callable[[Sandbox, str | None], Grade], dict[str, Any]]:
    """The check of a task whose cases are every input of `specs`; `wants` holds the reference's
    outputs per spec, `start` the starting code's (it fails a case when they differ)."""
    jobs, expected, counted, passing = [], [], [], []
    for spec, start_outputs, want_outputs in zip(specs, start, wants, strict=True):
        for args, want, had in zip(spec.inputs, want_outputs, start_outputs, strict=True):
            i = len(jobs)
            jobs.append([module, spec.name, list(args)])
            expected.append(canonical(want))
            if had == want:
                passing.append(i)
            elif i not in shown and canonical(want) not in TRIVIAL_JSON | {canonical(v) for v in args}:
                counted.append(i)
    if len(counted) < 2:
        raise Redraw("fewer than two hidden cases fail at the start with an output a stub cannot give")

    def check(sandbox: Sandbox, _: str | None) -> Grade:
        try:
            got = outputs_of(sandbox, jobs)
        except MalformedReport as exc:
            return malformed(len(counted), str(exc))
        ok = [g is not None and g == e for g, e in zip(got, expected, strict=True)]
        failures = [jobs[i][1] for i, good in enumerate(ok) if not good]
        return Grade(
            sum(ok[i] for i in counted),
            len(counted),
            all(ok),
            sum(not ok[i] for i in passing),
            f"failing: {failures[:5]}",
        )

    content = {"specs": [normalize_doc(s.doc) for s in specs], "inputs": [canonical(j[2]) for j in jobs]}
    return check, {"cases": len(jobs), "counted": len(counted), **content}


def visible_tests(module: str, cases: list[tuple[Spec, tuple[Any, ...], Any]]) -> str:
    """A test file the agent can run with plain `python3` (or pytest)."""
    lines = [
        "import os",
        "import sys",
        "",
        "sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))",
        f"import {module}  # noqa: E402",
        "",
    ]
    for i, (spec, args, want) in enumerate(cases):
        lines += [
            f"def test_{spec.name}_{i}():",
            f"    assert {module}.{spec.name}({', '.join(map(repr, args))}) == {want!r}",
            "",
        ]
    lines += [
        'if __name__ == "__main__":',
        "    failed = 0",
        "    for name, fn in list(globals().items()):",
        '        if name.startswith("test_"):',
        "            try:",
        "                fn()",
        '                print("PASS", name)',
        "            except Exception as exc:",
        "                failed += 1",
        '                print("FAIL", name, type(exc).__name__, exc)',
        "    sys.exit(1 if failed else 0)",
        "",
    ]
    return "\n".join(lines)


def _stub_outputs(spec: Spec) -> list[Any]:
    return [{"raised": "NotImplementedError"}] * len(spec.inputs)


def draw_spec(rng: random.Random, split: str, makers: tuple[Callable[[random.Random], Spec], ...]) -> Spec:
    """A spec that computes a function of `split`, with the inputs of `split` (see `code_probes`).

    Equal docstrings or equal programs compute equal functions, so they are in one split too."""
    for _ in range(MAX_SPEC_DRAWS):
        spec = rng.choice(makers)(rng)
        if behaviour_split(spec) == split:
            return with_probes(spec, split)
    raise RuntimeError(f"no {split} spec in {MAX_SPEC_DRAWS} draws")  # a bucket bug


def programs(*sources: str) -> list[str]:
    return [normalize_program(source) for source in sources]


def implement(rng: random.Random, split: str) -> Task:
    spec = draw_spec(rng, split, MAKERS)
    want = run(spec.source, spec.name, spec.inputs)
    check, meta = hidden_tests("solution", [spec], set(), [_stub_outputs(spec)], [want])
    meta["programs"] = programs(spec.stub(), spec.source)
    return Task(
        "implement",
        f"Implement the function `{spec.signature().removeprefix('def ').rstrip(':')}` in solution.py "
        f"(the workspace is /workspace).\nSpecification: {spec.doc}\n"
        "Hidden tests will import solution and call "
        f"{spec.name}. Call finish when done.",
        files({"solution.py": spec.stub()}),
        check,
        (call("write_file", path="solution.py", content=spec.source), call("finish", answer="")),
        meta=meta,
    )


def fix_bug(rng: random.Random, split: str) -> Task:
    spec = draw_spec(rng, split, MAKERS)
    # the first bug, in a drawn order, whose fix is of the split and whose program computes a function
    # of the split (so that no buggy program is another split's reference)
    bugs = (spec.buggy(b) for b in rng.sample(spec.bugs, len(spec.bugs)))
    buggy = next(
        (
            b
            for b in bugs
            if content_split("fix", fix_of(spec.source, b)) == split and behaviour_split(spec, b) == split
        ),
        None,
    )
    if buggy is None:
        raise Redraw(f"no bug of this spec asks for a {split} fix in a {split} program")
    want, had = run(spec.source, spec.name, spec.inputs), run(buggy, spec.name, spec.inputs)
    failing = [i for i in range(len(want)) if had[i] != want[i]]
    passing = [i for i in range(len(want)) if had[i] == want[i]]
    if len(failing) < 3:
        raise Redraw("the bug is exposed by fewer than three cases")
    # one failing case and one passing case are shown; at least two failing ones stay hidden
    shown = rng.sample(failing, 1) + rng.sample(passing, min(1, len(passing)))
    check, meta = hidden_tests("solution", [spec], set(shown), [had], [want])
    meta["programs"] = programs(buggy, spec.source)
    visible = visible_tests("solution", [(spec, spec.inputs[i], want[i]) for i in shown])
    return Task(
        "fix_bug",
        f"solution.py defines {spec.name}: {spec.doc}\nIts test fails: run `python3 tests/test_solution.py`. "
        "Find and fix the bug in solution.py (do not just special-case the tested inputs: hidden tests check "
        "more), then call finish.",
        files({"solution.py": buggy, "tests/test_solution.py": visible}),
        check,
        (
            call("execute_bash", command="python3 tests/test_solution.py"),
            call("write_file", path="solution.py", content=spec.source),
            call("execute_bash", command="python3 tests/test_solution.py"),
            call("finish", answer=""),
        ),
        meta=meta,
    )


def module_suite(rng: random.Random, split: str) -> Task:
    specs = [draw_spec(rng, split, MAKERS) for _ in range(3)]
    if len({s.name for s in specs}) < 3:
        raise Redraw("two functions drew the same name")
    wants = [run(s.source, s.name, s.inputs) for s in specs]
    shown_cases, shown, offset = [], set(), 0
    for spec, want in zip(specs, wants, strict=True):
        i = rng.randrange(len(spec.inputs))
        shown_cases.append((spec, spec.inputs[i], want[i]))
        shown.add(offset + i)
        offset += len(spec.inputs)
    check, meta = hidden_tests("mylib", specs, shown, [_stub_outputs(s) for s in specs], wants)
    meta["programs"] = programs(*(s.stub() for s in specs), *(s.source for s in specs))
    stubs = "\n\n".join(s.stub() for s in specs)
    listing = "\n".join(f"- {s.signature().removeprefix('def ').rstrip(':')}: {s.doc}" for s in specs)
    return Task(
        "module_suite",
        f"mylib.py has three unimplemented functions:\n{listing}\nMake mylib.py pass its test suite: "
        "`python3 tests/test_mylib.py` runs a sample; hidden tests check more cases. Call finish when done.",
        files(
            {
                "mylib.py": '"""Small utilities."""\n\n\n' + stubs,
                "tests/test_mylib.py": visible_tests("mylib", shown_cases),
            }
        ),
        check,
        (
            call("write_file", path="mylib.py", content="\n\n".join(s.source for s in specs)),
            call("execute_bash", command="python3 tests/test_mylib.py"),
            call("finish", answer=""),
        ),
        meta=meta,
    )


FAMILIES: dict[str, Builder] = {
    "implement": implement,
    "fix_bug": fix_bug,
    "module_suite": module_suite,
}
