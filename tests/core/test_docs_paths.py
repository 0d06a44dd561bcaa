"""Every path the docs cite exists: a moved or renamed module must take its docs with it (the design
page names files by their paths, and a reader follows them). A path git ignores is a build output the
docs name on purpose (the wheels the sandbox image installs, the UI tests' screenshots): it exists only
after its build ran, so it counts as present whether or not it is there yet; the answer must not
depend on which tests ran first."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP_FOLDERS = ("envs", "sandbox_server", "retrievers", "agent_train", "bench", "tests", "docker", "deploy",
               "examples", "docs")
CITED = re.compile(r"`((?:" + "|".join(TOP_FOLDERS) + r")/[A-Za-z0-9_./{}*<>-]*)")


def missing_paths(text: str, root: Path) -> list[str]:
    """The repository paths cited in backticks in `text` that do not exist under `root` (patterns
    with `{}`, `*` or `<>` are templates, not paths, and are left out)."""
    missing = []
    for match in CITED.finditer(text):
        path = match.group(1).rstrip(".").split("::")[0]
        if any(c in path for c in "{}*<>"):
            continue
        if not (root / path).exists() and not built_output(path, root):
            missing.append(path)
    return missing


def built_output(path: str, root: Path) -> bool:
    """Whether git ignores `path` under `root` (checked by the rules alone, not by the index)."""
    done = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=root, check=False)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"git check-ignore failed on {path!r} (exit {done.returncode})")
    return done.returncode == 0


def test_the_check_catches_a_path_that_does_not_exist() -> None:
    text = "The kit is in `envs/serving/runner.py`; the old one was `envs/cluster/serving.py`."
    assert missing_paths(text, ROOT) == ["envs/cluster/serving.py"]


def test_an_ignored_build_output_counts_as_present_before_its_build(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("docker/wheels/\n")
    text = "Wheels go to `docker/wheels/`; the image is `docker/Dockerfile`."
    assert missing_paths(text, tmp_path) == ["docker/Dockerfile"]


def test_every_path_the_docs_cite_exists() -> None:
    pages = [*sorted(ROOT.glob("docs/**/*.md")), ROOT / "README.md"]
    assert len(pages) > 10
    broken = {str(page.relative_to(ROOT)): missing
              for page in pages if (missing := missing_paths(page.read_text(), ROOT))}
    assert not broken, f"docs cite paths that do not exist: {broken}"
