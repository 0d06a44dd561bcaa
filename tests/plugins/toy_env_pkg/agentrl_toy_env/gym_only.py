"""Registers an env with Gymnasium alone, as many env packages do: `agentrl serve --import` serves it."""

import gymnasium as gym

gym.register(id="toy/Plain-v0", entry_point="agentrl_toy_env.env:CounterEnv")
