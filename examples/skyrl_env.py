"""Flights-v0 as a SkyRL env, driven the way SkyRL's generator drives it: make, init, step, close.

SkyRL trains with Ray and vLLM on GPUs; what it needs from agentrl is only this env. Register the ids
in each process that makes envs, name the id as the dataset's `env_class`, put `base_url` in the env's
config block and `seed`/`split` in the rows. This script plays a random agent against a server it
starts on loopback (`pip install -e '.[skyrl]'`):

    python examples/skyrl_env.py
"""

from __future__ import annotations

import skyrl_gym

from agentrl.flights.oracle import RandomPolicy
from agentrl.integrations.skyrl import register
from agentrl.server.local import serve_in_thread


def main() -> None:
    register()
    with serve_in_thread() as url:
        for seed in range(3):
            env = skyrl_gym.make("agentrl/Flights-v0", env_config={"base_url": url},
                                 extras={"seed": seed, "split": "train", "max_turns": 6})
            chat, _ = env.init([{"role": "system", "content": "You are an airline agent."}])
            policy, info, observation = RandomPolicy(seed), {}, chat[-1]["content"]
            done, total = False, 0.0
            while not done:
                out = env.step(policy(observation, info))
                done, total = out["done"], total + out["reward"]
                observation, info = (out["observations"] or [{"content": ""}])[0]["content"], out["metadata"]
            print(f"seed {seed}: {env.get_metrics()['turns']} turns, reward {total}")
            env.close()  # deletes the server-side episode


if __name__ == "__main__":
    main()
