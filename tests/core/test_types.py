"""The type check: basedpyright (pyright's rules, `[tool.basedpyright]` in pyproject.toml) over the package.

Pyright resolves `agentrl.*` from folders, not through the editable install's import hook, so the
check runs on the package laid out as the wheel installs it (`package_layout.py`) and reports each
problem at its source file and line. Any error or warning fails: there is no baseline. Run it
alone: `python -m pytest tests/core/test_types.py`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from package_layout import PYPROJECT, ROOT, lay_out, package_folders, source_of, tomllib
from support import unavailable


def type_problems(where: Path, planted: dict[str, str] | None = None) -> list[str]:
    """basedpyright's errors and warnings on the package laid out in `where` (with the `planted`
    modules added: {path in the layout: source}), as `path:line: severity: message (rule)`."""
    command = Path(sys.executable).with_name("basedpyright")
    if not command.exists():
        unavailable("basedpyright is not installed (the [dev] extra)")
    lay_out(where)
    for module, source in (planted or {}).items():
        (where / module).write_text(source)
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["basedpyright"]
    copied = {folder: "/".join(package.split(".")) for package, folder in package_folders().items()}

    def moved(path: str) -> str:  # a source folder's path -> the same path in the layout
        for folder in sorted(copied, key=len, reverse=True):
            if path == folder or path.startswith(f"{folder}/"):
                return copied[folder] + path[len(folder):]
        return path

    config = {**config, "include": [moved(p) for p in config["include"]],
              "exclude": [moved(p) for p in config.get("exclude", [])]}
    (where / "pyrightconfig.json").write_text(json.dumps(config))
    done = subprocess.run(
        [str(command), "--outputjson", "--pythonpath", sys.executable, "--project", str(where)],
        cwd=where, capture_output=True, text=True, timeout=1800, check=False,
    )
    if not done.stdout.lstrip().startswith("{"):
        raise RuntimeError(f"basedpyright did not run (exit status {done.returncode}): {done.stderr}")
    report = json.loads(done.stdout)
    problems = []
    for d in report["generalDiagnostics"]:
        if d["severity"] not in ("error", "warning"):
            continue
        path = source_of(Path(d["file"]), where).relative_to(ROOT)
        line = d["range"]["start"]["line"] + 1
        problems.append(f"{path}:{line}: {d['severity']}: {d['message']} ({d.get('rule', '')})")
    if report["summary"]["filesAnalyzed"] < 100:  # the layout, not an empty run, was checked
        raise RuntimeError(f"basedpyright analysed only {report['summary']['filesAnalyzed']} files")
    return problems


@pytest.mark.slow
def test_the_package_type_checks_and_a_new_type_error_fails(tmp_path):
    # one run (the check takes a while): the package as it is, plus one module with a new error
    planted = {"agentrl/core/planted.py": "def double(x: int) -> int:\n    return x * 2\n\n\ndouble('2')\n"}
    problems = type_problems(tmp_path, planted)
    expected = "envs/core/planted.py:5: error: "
    assert [p for p in problems if not p.startswith(expected)] == [], "\n".join(problems)
    assert len(problems) == 1 and "reportArgumentType" in problems[0], problems

