"""Code-v0's task families: implement a function, fix a bug that a test exposes, and make a small
module pass its test suite. Every variant is graded by hidden tests run in the sandbox after `finish`.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentrl.code_envs.code_specs import SPECS, Spec, expected_outputs
from agentrl.code_envs.tasks import CHECK_TIMEOUT_S, Grade, Task, call, variant_rng
from agentrl.code_envs.workspace import files

if TYPE_CHECKING:
    from agentrl.sandbox_server import Sandbox

GRADER_DIR = "/tmp/.agentrl-grade"
CASE_TIMEOUT_S = 2

# The grader is two processes. The judge holds the expected values and never imports solution
# code; the candidate imports the solution, runs each case under an alarm and reports encoded
# results on a private pipe. The expected values are deleted from disk before the candidate
# starts, so nothing the solution does (patching json, printing fake verdicts) can fake a pass.
JUDGE = r"""
import json, os, subprocess, sys
cases = json.load(open(sys.argv[1]))
os.unlink(sys.argv[1])
encode = json.JSONEncoder(sort_keys=True).encode
jobs = [{k: case[k] for k in ("module", "function", "args")} for case in cases]
read_fd, write_fd = os.pipe()
proc = subprocess.Popen([sys.executable, "-I", "-B", sys.argv[2], str(write_fd), sys.argv[3]],
                        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                        pass_fds=(write_fd,), cwd="/workspace")
os.close(write_fd)
try:
    proc.stdin.write(json.dumps(jobs).encode())
    proc.stdin.close()
except OSError:
    pass
with os.fdopen(read_fd, "rb") as pipe:
    lines = pipe.read().decode("utf-8", "replace").splitlines()
proc.wait()
passed, failures = 0, []
for i, case in enumerate(cases):
    try:
        result = json.loads(lines[i])
        ok = result.get("ok") is True and result.get("got") == encode(case["expected"])
    except Exception:
        ok = False
    passed += ok
    if not ok:
        failures.append(case["function"])
print(json.dumps({"passed": passed, "total": len(cases), "failures": failures[:5]}))
"""

CANDIDATE = r"""
import importlib, json, os, signal, sys
out = os.fdopen(int(sys.argv[1]), "w")
timeout = int(sys.argv[2])
encode = json.JSONEncoder(sort_keys=True).encode
jobs = json.load(sys.stdin)
sys.path.insert(0, "/workspace")
def alarm(*_):
    raise TimeoutError("case timed out")
signal.signal(signal.SIGALRM, alarm)
for job in jobs:
    try:
        signal.alarm(timeout)
        fn = getattr(importlib.import_module(job["module"]), job["function"])
        line = encode({"ok": True, "got": encode(fn(*job["args"]))})
    except BaseException as exc:
        line = encode({"ok": False, "error": type(exc).__name__})
    finally:
        signal.alarm(0)
    out.write(line + "\n")
    out.flush()
"""


def _cases(module: str, specs: list[Spec]) -> list[dict[str, Any]]:
    return [
        {"module": module, "function": s.name, "args": list(args), "expected": out}
        for s in specs
        for args, out in zip(s.inputs, expected_outputs(s), strict=True)
    ]


def hidden_tests(cases: list[dict[str, Any]]) -> Callable[[Sandbox, str | None], Grade]:
    def check(sandbox: Sandbox, _: str | None) -> Grade:
        sandbox.write_file(f"{GRADER_DIR}/judge.py", JUDGE.encode())
        sandbox.write_file(f"{GRADER_DIR}/candidate.py", CANDIDATE.encode())
        sandbox.write_file(f"{GRADER_DIR}/cases.json", json.dumps(cases).encode())
        out = sandbox.exec(
            f"python3 -I -B {GRADER_DIR}/judge.py {GRADER_DIR}/cases.json {GRADER_DIR}/candidate.py "
            f"{CASE_TIMEOUT_S}; rm -rf {shlex.quote(GRADER_DIR)}",
            timeout_s=CHECK_TIMEOUT_S + CASE_TIMEOUT_S * len(cases),
            mode="oneshot",
            max_output_bytes=1 << 20,
        )
        try:
            result = json.loads(out.stdout.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            return Grade(0, len(cases), f"grader produced no verdict: {out.status} {out.stderr[-300:]!r}")
        return Grade(result["passed"], len(cases), f"failures: {result['failures']}")

    return check


def visible_tests(module: str, cases: list[dict[str, Any]], prefix: str = "..") -> str:
    """A test file the agent can run with plain `python3` (or pytest)."""
    lines = [
        "import os",
        "import sys",
        "",
        f"sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), {prefix!r}))",
        f"import {module}  # noqa: E402",
        "",
    ]
    for i, case in enumerate(cases):
        args = ", ".join(repr(a) for a in case["args"])
        lines += [
            f"def test_{case['function']}_{i}():",
            f"    assert {module}.{case['function']}({args}) == {case['expected']!r}",
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


def implement(variant: int) -> Task:
    spec = SPECS[variant % len(SPECS)](variant_rng("implement", variant))
    cases = _cases("solution", [spec])
    return Task(
        f"implement/{variant}",
        "implement",
        f"Implement the function `{spec.signature().removeprefix('def ').rstrip(':')}` in solution.py "
        f"(the workspace is /workspace).\nSpecification: {spec.doc}\n"
        "Hidden tests will import solution and call "
        f"{spec.name}. Call finish when done.",
        files({"solution.py": spec.stub()}),
        hidden_tests(cases),
        (call("write_file", path="solution.py", content=spec.source), call("finish", answer="")),
        meta={"hidden_inputs": json.dumps([c["args"] for c in cases])},
    )


def fix_bug(variant: int) -> Task:
    spec = SPECS[variant % len(SPECS)](variant_rng("fix_bug", variant))
    cases = _cases("solution", [spec])
    namespace: dict[str, Any] = {}
    exec(spec.buggy(), namespace)
    failing = [c for c in cases if json.loads(json.dumps(namespace[spec.name](*c["args"]))) != c["expected"]]
    shown = failing[:2] + [c for c in cases if c not in failing][:1]
    return Task(
        f"fix_bug/{variant}",
        "fix_bug",
        f"solution.py defines {spec.name}: {spec.doc}\nIts test fails: run `python3 tests/test_solution.py`. "
        "Find and fix the bug in solution.py (do not just special-case the tested inputs: hidden tests check "
        "more), then call finish.",
        files({"solution.py": spec.buggy(), "tests/test_solution.py": visible_tests("solution", shown)}),
        hidden_tests(cases),
        (
            call("execute_bash", command="python3 tests/test_solution.py"),
            call("write_file", path="solution.py", content=spec.source),
            call("execute_bash", command="python3 tests/test_solution.py"),
            call("finish", answer=""),
        ),
        meta={"hidden_inputs": json.dumps([c["args"] for c in cases])},
    )


def module_suite(variant: int) -> Task:
    rng = variant_rng("module_suite", variant)
    specs = [make(rng) for make in rng.sample(SPECS, 3)]
    cases = _cases("mylib", specs)
    shown = [next(c for c in cases if c["function"] == s.name and c["args"]) for s in specs]
    stubs = "\n\n".join(s.stub() for s in specs)
    listing = "\n".join(f"- {s.signature().removeprefix('def ').rstrip(':')}: {s.doc}" for s in specs)
    return Task(
        f"module_suite/{variant}",
        "module_suite",
        f"mylib.py has three unimplemented functions:\n{listing}\nMake mylib.py pass its test suite: "
        "`python3 tests/test_mylib.py` runs a sample; hidden tests check more cases. Call finish when done.",
        files(
            {
                "mylib.py": '"""Small utilities."""\n\n\n' + stubs,
                "tests/test_mylib.py": visible_tests("mylib", shown),
            }
        ),
        hidden_tests(cases),
        (
            call("write_file", path="mylib.py", content="\n\n".join(s.source for s in specs)),
            call("execute_bash", command="python3 tests/test_mylib.py"),
            call("finish", answer=""),
        ),
        meta={"hidden_inputs": json.dumps([c["args"] for c in cases])},
    )


FAMILY_SIZES: dict[str, tuple[Callable[[int], Task], int]] = {
    "implement": (implement, 24),
    "fix_bug": (fix_bug, 24),
    "module_suite": (module_suite, 14),
}
TASK_IDS: tuple[str, ...] = tuple(f"{f}/{v}" for f, (_, n) in FAMILY_SIZES.items() for v in range(n))


def get_task(task_id: str) -> Task:
    family, _, variant = task_id.partition("/")
    if family not in FAMILY_SIZES or not variant.isdigit() or int(variant) >= FAMILY_SIZES[family][1]:
        raise KeyError(f"unknown Code-v0 task {task_id!r}")
    return FAMILY_SIZES[family][0](int(variant))
