"""The package as users get it: a light import, and the folders behind each subpackage.

The wheel itself, built and run in a fresh virtualenv, is checked by tests/wheel_check.sh (tests/run).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# and the env contract, which loads the server: it is for tests (its import rule is in pyproject.toml)
HEAVY = ["sqlalchemy", "httpx", "fastapi", "torch", "docker", "transformers", "faiss", "pyserini",
         "agentrl.testing"]


def test_import_agentrl_is_light():
    code = (
        "import sys, json, agentrl; "
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_the_cli_parser_builds_without_docstrings():
    """`python -OO` drops docstrings: the command then has no description, and still runs."""
    code = "from agentrl.cli import build_parser; print(build_parser().format_help())"
    out = subprocess.run([sys.executable, "-OO", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("usage: agentrl")


def test_subpackages_map_to_their_folders():
    import agentrl.agent_train
    import agentrl.retrievers
    import agentrl.sandbox_server

    assert Path(agentrl.sandbox_server.__file__).parent == ROOT / "sandbox_server"
    assert Path(agentrl.retrievers.__file__).parent == ROOT / "retrievers"
    assert Path(agentrl.agent_train.__file__).parent == ROOT / "agent_train"
