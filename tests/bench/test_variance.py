"""bench/variance.py: its policies and figures are what they claim; the same seed, the same study."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import agentrl  # noqa: F401  (registers the ids)
from agentrl.flights.oracle import OraclePolicy

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("variance_bench", ROOT / "bench" / "variance.py")
variance = sys.modules["variance_bench"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(variance)


def actions(env, policy, seed: int, family: str) -> list[str]:
    observation, info = env.reset(seed=seed, options={"family": family})
    played, done = [], False
    while not done:
        played.append(policy(observation, info))
        observation, _r, terminated, truncated, info = env.step(played[-1])
        done = terminated or truncated
    return played


def test_noisy_oracle_at_p_1_is_the_oracle_and_at_p_0_never_is():
    env = gym.make("agentrl/Flights-v0", stochastic=True).unwrapped
    try:
        for family in ("seat", "cancel_rebook"):
            oracle = actions(env, OraclePolicy(), 4, family)
            assert actions(env, variance.NoisyOracle(1.0, seed=9), 4, family) == oracle
            noise = actions(env, variance.NoisyOracle(0.0, seed=9), 4, family)
            assert noise != oracle and noise[0] != oracle[0]
    finally:
        env.close()


def test_the_same_seed_gives_the_same_study():
    args = (2, 3, (0.5,), 5, ("cheapest", "multi_pax"))
    first = variance.study(*args)
    assert variance.study(*args) == first
    assert {c.world for c in first} == {"deterministic", "stochastic"}
    assert all(len(c.groups) == 2 and all(len(g) == 3 for g in c.groups) for c in first)


@pytest.mark.slow
def test_oracle_groups_teach_nothing_noise_scores_nothing_and_mixtures_vary():
    cells = variance.study(tasks=2, group=3, ps=(0.0, 0.8), seed=0)
    for cell in (c for c in cells if c.policy == "oracle"):
        # the oracle retries busy calls and re-searches after fare changes: 1.0 in both worlds
        assert (cell.mean, cell.within_variance, cell.zero_variance) == (1.0, 0.0, 1.0), cell
    for world in variance.WORLDS:
        noise = [c for c in cells if (c.world, c.p, c.policy) == (world, 0.0, "noisy")]
        assert sum(c.mean for c in noise) / len(noise) < 0.15
        mixed = [c for c in cells if (c.world, c.p) == (world, 0.8)]
        assert 0.3 < sum(c.mean for c in mixed) / len(mixed) < 0.98
        assert any(c.within_variance > 0 for c in mixed)


def test_the_figure_is_written(tmp_path):
    cells = variance.study(1, 2, (0.0, 0.9), families=("budget",))
    path = variance.plot(cells, tmp_path / "v.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
