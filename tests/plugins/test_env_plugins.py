"""Envs from another package: tests/plugins/toy_env_pkg installed into a fresh virtualenv.

The virtualenv is chained to .venv (a .pth file adds its site-packages, as tests/frameworks.sh does:
agentrl and its dependencies come from there) and gets the toy package alone (`pip install
--no-deps`). Everything then runs as a user runs it, in subprocesses of that virtualenv: `import
agentrl` registers the toy ids from the package's entry points, `agentrl serve` serves them (and an
env registered with Gymnasium alone, through `--import`), `agentrl check` passes the good env and
fails the broken one naming the promise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support import free_port

HERE = Path(__file__).resolve().parent
pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fresh virtualenv's python, with the toy package installed."""
    root = tmp_path_factory.mktemp("plugins")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    main_site = sysconfig.get_paths()["purelib"]
    Path(site, "_chain_agentrl.pth").write_text(f"import site; site.addsitedir({main_site!r})\n")
    source = root / "toy_env_pkg"  # a copy: the build writes its folders beside the sources
    shutil.copytree(HERE / "toy_env_pkg", source)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--no-build-isolation", str(source)], check=True)
    return python


def agentrl(python: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-m", "agentrl", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=python.parents[2])


def test_import_agentrl_registers_the_ids_without_importing_the_package_and_warns_of_a_broken_entry(venv):
    code = ("import sys, gymnasium as gym, agentrl; "
            "print('toy/Counter-v0' in gym.registry, 'toy/Nameless-v0' in gym.registry, "
            "'agentrl_toy_env' in sys.modules)")
    done = subprocess.run([str(venv), "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "False", "False"]
    assert "'toy/Nameless-v0' of the package agentrl-toy-env 0.3.1" in done.stderr
    assert "not a \"module:Class\" entry point" in done.stderr


@pytest.fixture(scope="module")
def served(venv: Path) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([str(venv), "-W", "ignore", "-m", "agentrl", "serve", "--port", str(port),
                                "--no-ui", "--import", "agentrl_toy_env.gym_only"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                pytest.fail(f"agentrl serve exited: {process.stdout.read() if process.stdout else ''}")
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "agentrl serve did not start"
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.parametrize("env_id", ["toy/Counter-v0", "toy/Plain-v0"])
def test_agentrl_serve_serves_the_package_envs(served, env_id):
    with httpx.Client(base_url=served, timeout=30) as http:
        created = http.post("/v1/episodes", json={"env_id": env_id, "seed": 4})
        assert created.status_code == 201, created.text
        episode = created.json()
        assert "Bring the counter from 0 to" in episode["observation"]
        step = http.post(f"/v1/episodes/{episode['episode_id']}/step",
                         json={"action": '<tool_call>{"name": "add", "arguments": {"n": 2}}</tool_call>'})
        assert step.status_code == 200, step.text
        assert "the counter is 2" in step.json()["observation"]
        assert http.delete(f"/v1/episodes/{episode['episode_id']}").status_code == 200


def test_v1_envs_names_each_envs_package_and_version(served):
    envs = {spec["env_id"]: spec for spec in httpx.get(f"{served}/v1/envs", timeout=60).json()["envs"]}
    counter = envs["toy/Counter-v0"]
    assert (counter["package"], counter["version"]) == ("agentrl-toy-env", "0.3.1")
    assert envs["toy/Plain-v0"]["package"] == "agentrl-toy-env"  # found by its module's top-level package
    assert envs["agentrl/Echo-v0"]["package"] == "agentrl-gym" and envs["agentrl/Echo-v0"]["version"]
    assert "toy/Nameless-v0" not in envs


def test_agentrl_check_passes_the_good_env(venv):
    done = agentrl(venv, "check", "toy/Counter-v0")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "toy/Counter-v0 keeps the env contract's promises" in done.stdout


def test_agentrl_check_fails_the_unseeded_env_naming_the_promise(venv):
    done = agentrl(venv, "check", "toy/Unseeded-v0", "--promise", "same_seed", "--promise", "junk")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "toy/Unseeded-v0 broke 1 of the env contract's promises" in done.stdout
    assert "- same_seed (the same seed gives the same observations" in done.stdout


def test_agentrl_check_refuses_an_unknown_env(venv):
    done = agentrl(venv, "check", "toy/Missing-v0")
    assert done.returncode == 2 and "unknown env 'toy/Missing-v0'" in done.stderr


def test_without_the_package_the_ids_are_unknown():
    """The ids come from the installed package, not from anything in agentrl: .venv lacks them."""
    code = "import gymnasium as gym, agentrl; print('toy/Counter-v0' in gym.registry)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert done.stdout.strip() == "False"
