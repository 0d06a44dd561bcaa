"""Schemathesis with every check against a server's own OpenAPI document, as a test.

Its command line is run, as an outside tester would run it: every phase (explicit examples, the
coverage of each keyword's boundaries, fuzzing, stateful sequences along the inferred links) and
`--checks all` (responses match their declared status, content type, headers and schema; valid
requests are accepted and invalid ones refused; `Allow` on 405; ...), a bounded number of cases
per operation and a fixed seed. Failures a schema cannot rule out are dropped only by a
`filter_failure` hook module of the area's tests, each rule naming its case and why; the run's
output says how many it dropped.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


def check_conformance(
    base_url: str,
    *,
    hooks: Path,
    cwd: Path,
    max_examples: int,
    headers: dict[str, str] | None = None,
    timeout_s: float = 300,
) -> str:
    """Run schemathesis against `base_url`'s `/openapi.json`; fail with its report on any failure or
    error. `hooks` is the module whose `filter_failure` hook drops the failures the schema cannot rule
    out; `cwd` receives schemathesis' crash cache (.schemathesis/). Returns the report."""
    command = [
        str(SCHEMATHESIS), "--no-color", "run", f"{base_url}/openapi.json",
        "--checks", "all",
        "--max-examples", str(max_examples),
        "--seed", "1",
        "--workers", "1",
        "--generation-database", "none",
        "--request-timeout", "120",
        # time is no part of the schema: a generous bound, for a loaded machine (a sandbox's start)
        "--max-response-time", "120",
        # a path parameter that may hold `/` (`{env_id:path}`) makes many drawn values unusable
        "--suppress-health-check", "filter_too_much",
    ]
    for name, value in (headers or {}).items():
        command += ["--header", f"{name}: {value}"]
    paths = [str(hooks.parent), str(TESTS), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": hooks.stem, "PYTHONPATH": os.pathsep.join(filter(None, paths))}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report[-20_000:]
    return report


def cases_run(report: str) -> int:
    """How many cases the run generated, as its summary says."""
    found = re.search(r"(\d+) generated", report)
    assert found, report[-2000:]
    return int(found.group(1))
