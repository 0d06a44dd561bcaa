"""`test_frameworks_<name>.py` run in that framework's own virtualenv (`.venvs/<name>`, made by
tests/frameworks.sh: their pins collide with each other's and agentrl's), started one pytest per
venv by `test_framework_venvs.py`, which sets AGENTRL_FRAMEWORK. Elsewhere they are not collected."""

from __future__ import annotations

import os
from pathlib import Path

_framework = os.environ.get("AGENTRL_FRAMEWORK")
collect_ignore = [p.name for p in Path(__file__).parent.glob("test_frameworks_*.py")
                  if p.name != f"test_frameworks_{_framework}.py"]
if _framework:
    # inside a framework's venv only its own file runs
    collect_ignore += [p.name for p in Path(__file__).parent.glob("test_*.py")
                       if not p.name.startswith("test_frameworks_")]
