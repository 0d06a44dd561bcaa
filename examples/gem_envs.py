"""Flights-v0 as GEM envs, the interface ROLL's agentic pipeline drives: a group of four envs made
with the same keywords and reset with the same seed, as ROLL's GRPO/GiGPO groups are, stepped by
GEM's own vector env. This script plays random agents against a server it starts on loopback
(`pip install -e '.[gem]'`):

    python examples/gem_envs.py
"""

from __future__ import annotations

import gem

from agentrl.flights.oracle import RandomPolicy
from agentrl.integrations.gem import register
from agentrl.server.local import serve_in_thread


def main() -> None:
    register()
    with serve_in_thread() as url:
        group = gem.make_vec(["agentrl/Flights-v0"] * 4, vec_kwargs=[{
            "base_url": url, "split": "train", "env_kwargs": {"max_turns": 6}}] * 4)
        observations, infos = group.reset(seed=[7] * 4)  # one task for the whole group
        assert len(set(observations)) == 1
        policies = [RandomPolicy(i) for i in range(4)]
        totals, done = [0.0] * 4, [False] * 4
        for _ in range(6):
            actions = [policy(o, i) for policy, o, i in zip(policies, observations, infos, strict=True)]
            observations, rewards, terminated, truncated, infos = group.step(actions)
            for k in range(4):
                totals[k] += 0.0 if done[k] else float(rewards[k])
                done[k] = done[k] or bool(terminated[k] or truncated[k])
            if all(done):
                break
        print("rewards of the group:", totals)
        for env in group.envs:
            env.close()  # deletes any episode still open on the server


if __name__ == "__main__":
    main()
