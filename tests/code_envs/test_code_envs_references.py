"""Every generated task is solvable: the reference solution scores 1.0 on 500 seeds per env (half
train, half test, every family), on the real Docker engine; doing nothing scores 0.

Episodes run 16 at a time (each thread its own env, all drawing on one warm pool): an episode is
mostly waiting for its container, so threads overlap them on a 2-core machine.
"""

from __future__ import annotations

import pytest
from code_envs_helpers import ENV_CLASSES, call, run_episodes

from agentrl.code_envs.tasks import as_action

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SEEDS = 500
THREADS = 16


@pytest.mark.parametrize("env_id", ["agentrl/Bash-v0", "agentrl/Code-v0"])
def test_reference_solutions_score_one_on_500_seeds(docker_backend, env_id):
    families = tuple(ENV_CLASSES[env_id].task_families)
    failures = {}
    for split in ("train", "test"):
        jobs = [
            (families[seed % len(families)], seed)
            for seed in range(SEEDS)
            if (seed % 2 == 0) == (split == "train")
        ]
        results = run_episodes(
            env_id, jobs, lambda task: [as_action(c) for c in task.solution], split=split, threads=THREADS
        )
        failures.update({(split, *job): info for job, (reward, info) in results.items() if reward != 1.0})
        assert len(results) == SEEDS // 2
    assert not failures, failures


@pytest.mark.parametrize("env_id", ["agentrl/Bash-v0", "agentrl/Code-v0"])
def test_doing_nothing_scores_zero(docker_backend, env_id):
    families = tuple(ENV_CLASSES[env_id].task_families)
    jobs = [(family, seed) for family in families for seed in (1, 2, 3)]
    results = run_episodes(env_id, jobs, lambda _: [call("finish", answer="")], threads=THREADS)
    assert all(reward == 0.0 and not info["solved"] for reward, info in results.values()), results
