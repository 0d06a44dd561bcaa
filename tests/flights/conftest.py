import gymnasium as gym
import pytest

import agentrl  # noqa: F401  (registers the ids)


@pytest.fixture
def make_flights():
    envs = []

    def make(**kwargs):
        env = gym.make("agentrl/Flights-v0", **kwargs).unwrapped
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()
