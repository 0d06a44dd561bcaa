"""The package as users get it: a light import, and a wheel that works in a fresh venv."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ["sqlalchemy", "httpx", "fastapi", "torch", "docker", "transformers", "faiss", "pyserini"]


def test_import_agentrl_is_light():
    code = (
        "import sys, json, agentrl; "
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_subpackages_map_to_their_folders():
    import agentrl.agent_train
    import agentrl.retrievers
    import agentrl.sandbox_server

    assert Path(agentrl.sandbox_server.__file__).parent == ROOT / "sandbox_server"
    assert Path(agentrl.retrievers.__file__).parent == ROOT / "retrievers"
    assert Path(agentrl.agent_train.__file__).parent == ROOT / "agent_train"


@pytest.mark.slow
def test_built_wheel_installs_and_makes_envs_in_a_fresh_venv(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
    )
    [wheel] = dist.glob("agentrl_gym-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], check=True)
    code = """
import gymnasium as gym, agentrl, agentrl.sandbox_server, agentrl.retrievers, agentrl.agent_train
env = gym.make("agentrl/Flights-v0")
obs, info = env.reset(seed=0)
assert "<tool_call>" in obs and info["tools"]
env2 = gym.make("agentrl:agentrl/Echo-v0")
print(type(env.unwrapped).__name__, type(env2.unwrapped).__name__, agentrl.__file__)
"""
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    name, echo, location = out.stdout.split()
    assert (name, echo) == ("FlightsEnv", "EchoEnv")
    assert str(env_dir) in location  # the wheel's copy, not the source tree
