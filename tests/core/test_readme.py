"""The README a newcomer reads first: short, its links live, its install line the package's, its code run.

Its Python examples run as written (the serving one against a real server on loopback, its URL
swapped for the server's), so an API change that breaks them fails here rather than for a reader.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from support import AppServer

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
README_URL = "http://127.0.0.1:8000"


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, flags=re.S | re.M)


def run_python(code: str, tmp_path: Path) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_readme_is_at_most_200_lines():
    assert len(README.splitlines()) <= 200


def test_readme_links_point_at_files_of_the_checkout():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert local, "the README links to the docs"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, missing


def test_quickstart_and_install_lines():
    quickstart, install, *_ = code_blocks("bash")
    assert quickstart.splitlines() == [
        "python3 -m pip install -e . && python3 -m agentrl demo",
        "bash tests/run",
    ]
    # the name the install line gives is the distribution tests/wheel_check.sh builds and runs
    name = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
    assert install.split("#")[0].split() == ["python3", "-m", "pip", "install", name]


def test_gymnasium_example_runs(tmp_path):
    gymnasium_example = code_blocks("python")[0]
    run_python(gymnasium_example + "\nassert '<tool_response>' in observation, observation\n", tmp_path)


def test_serving_example_runs_against_a_server(tmp_path):
    from agentrl.server.app import create_app

    serving_example = code_blocks("python")[1]
    assert README_URL in serving_example
    with AppServer(create_app()) as server:
        out = run_python(serving_example.replace(README_URL, server.url), tmp_path)
    assert out.strip() == "0.0"  # the example's agent answers wrong: the reward says so
