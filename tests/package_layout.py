"""agentrl laid out as its wheel installs it, for tools that read a package from its folder.

The four folders (`envs/`, `sandbox_server/`, `retrievers/`, `agent_train/`) make one package,
`agentrl`, only once installed (setuptools' `package-dir` in pyproject.toml); the editable install
maps them with an import hook that the import linter and the type checker do not run. `lay_out`
copies the modules into one `agentrl` folder, and `source_of` maps a copy back to its source file.
"""

from __future__ import annotations

import shutil
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"


def package_folders() -> dict[str, str]:
    """`agentrl` and its subpackages that live in folders of their own -> their folder, parents first."""
    folders = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-dir"]
    mine = {name: path for name, path in folders.items() if name == "agentrl" or name.startswith("agentrl.")}
    return dict(sorted(mine.items(), key=lambda item: item[0].count(".")))


def lay_out(where: Path) -> Path:
    """Copy agentrl's modules into `where`/agentrl as the wheel installs them; returns `where`."""
    for package, folder in package_folders().items():
        shutil.copytree(ROOT / folder, where.joinpath(*package.split(".")), dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.html", "*.js", "*.css"))
    return where


def source_of(copy: Path, where: Path) -> Path:
    """The source file of a module copied by `lay_out(where)`."""
    parts = copy.relative_to(where).parts
    for package, folder in reversed(package_folders().items()):  # the deepest package first
        depth = package.count(".") + 1
        if tuple(package.split(".")) == parts[:depth]:
            return ROOT / folder / Path(*parts[depth:])
    raise ValueError(f"{copy} is not a module of agentrl laid out in {where}")
