#!/usr/bin/env bash
# The package as users install it (`pip install agentrl-gym`): the tests run on an editable install,
# which reads files straight from the checkout and so cannot notice one the wheel leaves out. This
# builds the sdist and, from it, the wheel; fails on any build warning; `twine check`s both; checks
# that every file under the package folders is in the wheel; then installs the wheel into a fresh
# virtualenv and, from a folder outside the checkout, runs tests/wheel_check.py there (the demo,
# `agentrl serve` and its page, `agentrl sandbox serve` and a command in a sandbox, every module).
#
#   bash tests/wheel_check.sh        # with the checkout's .venv (tests/run makes it), or PYTHON=...
#
# The fresh virtualenv gets the wheel and nothing else (`--no-deps`); a .pth file then puts the
# current environment's site-packages after its own, so the dependencies come from there without a
# second download. Only the path is chained: the .pth files there (the editable install's finder
# among them) do not run, so `agentrl` can only come from the wheel, which wheel_check.py asserts,
# and it checks that the installed environment meets every requirement the wheel declares.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
# the environment to build with and to take the dependencies from: the checkout's .venv (tests/run)
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python; fi
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/agentrl-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT
log() { echo "[wheel_check] $*" >&2; }

# --- 1. build: sdist, then the wheel from the sdist; any warning fails ------------------------------
log "building the sdist and the wheel"
# with PYTHONDONTWRITEBYTECODE set, setuptools warns that it skips byte-compiling: not a packaging fault
if ! env -u PYTHONDONTWRITEBYTECODE "$PYTHON" -m build --outdir "$work/dist" . >"$work/build.log" 2>&1; then
    cat "$work/build.log" >&2
    log "FAILED: python -m build"
    exit 1
fi
if grep -n -E '^(WARNING|warning:)|[A-Za-z]*Warning\b' "$work/build.log" >"$work/warnings.log"; then
    cat "$work/warnings.log" >&2
    log "FAILED: the build warns (lines above; \`python -m build\` prints them in context)"
    exit 1
fi
sdist="$(ls "$work"/dist/*.tar.gz)"
wheel="$(ls "$work"/dist/*.whl)"
"$PYTHON" -m twine check --strict "$sdist" "$wheel"

# --- 2. no file left out: every file of the package folders is in the wheel ------------------------
"$PYTHON" - "$wheel" <<'EOF'
"""Files under the package folders (tracked or not ignored) that the wheel does not hold."""
import subprocess
import sys
import zipfile

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from pathlib import PurePosixPath

setuptools = tomllib.load(open("pyproject.toml", "rb"))["tool"]["setuptools"]
folders = {folder.rstrip("/"): name for name, folder in setuptools["package-dir"].items()}
listed = subprocess.run(
    ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *folders],
    capture_output=True, text=True, check=True,
).stdout.split()
shipped = set(zipfile.ZipFile(sys.argv[1]).namelist())
missing = []
for path in listed:
    folder = max((f for f in folders if path.startswith(f + "/")), key=len)  # the deepest mapping
    inside = PurePosixPath(path).relative_to(folder)
    target = str(PurePosixPath(*folders[folder].split("."), inside))
    if target not in shipped:
        missing.append(f"{path} (as {target})")
if missing:
    sys.exit("files the wheel leaves out (declare them in pyproject.toml):\n  " + "\n  ".join(missing))
print(f"[wheel_check] all {len(listed)} files of {', '.join(sorted(folders))} are in the wheel")
EOF

# --- 3. a fresh virtualenv holding the wheel, the dependencies chained from this environment -------
log "installing the wheel into a fresh virtualenv"
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --no-deps --no-index "$wheel"
site_here="$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$PYTHON" -c '
import sys, sysconfig
print("\n".join(p for p in sys.path if p.endswith(("site-packages", "dist-packages"))))
' >"$site_here/_dependencies.pth"

# --- 4. run it from outside the checkout -----------------------------------------------------------
mkdir "$work/run"
cp tests/wheel_check.py "$work/run/"
cd "$work/run"
env -u PYTHONPATH PATH="$work/venv/bin:$PATH" VIRTUAL_ENV="$work/venv" \
    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false \
    "$work/venv/bin/python" wheel_check.py --venv "$work/venv" --wheel "$wheel" --checkout "$ROOT"
log "passed"
