"""Each framework's adapter test, run by pytest in that framework's own virtualenv (tests/frameworks.sh
makes them; their pins cannot share this one). A missing venv skips here, and fails under CI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import unavailable

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = sorted(p.stem.removeprefix("test_frameworks_")
                    for p in Path(__file__).parent.glob("test_frameworks_*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_framework_adapter_passes_in_its_own_venv(framework):
    python = ROOT / ".venvs" / framework / "bin" / "python"
    if not python.exists():
        unavailable(f"{python} is missing; bash tests/frameworks.sh makes it")
    env = {**os.environ, "AGENTRL_FRAMEWORK": framework,
           # Ray (verl imports it) binds every service to 127.0.0.1 only with this switch
           "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled"}
    env.pop("VIRTUAL_ENV", None)
    proc = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           f"tests/integrations/test_frameworks_{framework}.py"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    sys.stdout.write(proc.stdout[-3000:])
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout and " skipped" not in proc.stdout
