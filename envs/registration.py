"""Gymnasium registration of agentrl's envs.

Gymnasium 1.x loads no entry-point plugins, so `import agentrl` registers the ids; the form
`gym.make("agentrl:agentrl/Flights-v0")` imports this package first and works without it.
Each id goes through `make_env`, which builds the env in-process, or a `RemoteEnv` when a
`base_url` is given (the same env served by `agentrl serve`).
"""

from __future__ import annotations

import copy
from functools import partial
from importlib import import_module
from typing import Any

import gymnasium as gym

# id -> "module:Class" of the in-process implementation
ENV_ENTRY_POINTS: dict[str, str] = {
    "agentrl/Echo-v0": "agentrl.echo:EchoEnv",
    "agentrl/Flights-v0": "agentrl.flights.env:FlightsEnv",
    "agentrl/Search-v0": "agentrl.search.env:SearchEnv",
    "agentrl/Bash-v0": "agentrl.code_envs.bash_env:BashEnv",
    "agentrl/Code-v0": "agentrl.code_envs.code_env:CodeEnv",
    "agentrl/TauAirline-v0": "agentrl.tau_airline.env:TauAirlineEnv",
}
ENV_IDS: tuple[str, ...] = tuple(ENV_ENTRY_POINTS)


def load_env_class(env_id: str) -> type[gym.Env]:
    module_name, _, attr = ENV_ENTRY_POINTS[env_id].partition(":")
    return getattr(import_module(module_name), attr)


def make_env(env_id: str, base_url: str | None = None, **kwargs: Any) -> gym.Env:
    """Build `env_id` locally, or connect to it on an agentrl server when `base_url` is set."""
    if base_url is not None:
        from agentrl.client import RemoteEnv

        return RemoteEnv(env_id, base_url=base_url, **kwargs)
    env = load_env_class(env_id)(**kwargs)
    if (registered := gym.registry.get(env_id)) is not None:  # the id, as `gym.make` sets it: records name it
        env.spec = copy.copy(registered)  # not `dataclasses.replace`, which parses the id again (~0.1 ms)
        env.spec.kwargs = dict(kwargs)
    return env


def register_envs() -> None:
    for env_id in ENV_ENTRY_POINTS:
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=partial(make_env, env_id), disable_env_checker=False)
