"""Gymnasium registration of agentrl's envs.

Gymnasium 1.x loads no entry-point plugins, so `import agentrl` registers the ids; the form
`gym.make("agentrl:agentrl/Flights-v0")` imports this package first and works without it.
Each id goes through `make_env`, which builds the env in-process, or a `RemoteEnv` when a
`base_url` is given (the same env served by `agentrl serve`). An id is built by its class, or by
a factory where its kwargs choose the class (Flights-v0's `granularity`); the class stays the
id's entry point, read for what it declares (`operator_kwargs`, its tools).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
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
# id -> "module:function" building it, where its kwargs choose among classes
ENV_FACTORIES: dict[str, str] = {
    "agentrl/Flights-v0": "agentrl.flights.granularity:make_flights_env",
}


def _load(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    return getattr(import_module(module_name), attr)


def load_env_class(env_id: str) -> type[gym.Env]:
    """The id's class (for Flights-v0, the default granularity's)."""
    return _load(ENV_ENTRY_POINTS[env_id])


def load_env_factory(env_id: str) -> Callable[..., gym.Env]:
    """What builds the id from its kwargs: its factory, or else its class."""
    return _load(ENV_FACTORIES.get(env_id) or ENV_ENTRY_POINTS[env_id])


def make_env(env_id: str, base_url: str | None = None, **kwargs: Any) -> gym.Env:
    """Build `env_id` locally, or connect to it on an agentrl server when `base_url` is set."""
    if base_url is not None:
        from agentrl.client import RemoteEnv

        return RemoteEnv(env_id, base_url=base_url, **kwargs)
    env = load_env_factory(env_id)(**kwargs)
    if (registered := gym.registry.get(env_id)) is not None:  # the id, as `gym.make` sets it: records name it
        env.spec = copy.copy(registered)  # not `dataclasses.replace`, which parses the id again (~0.1 ms)
        env.spec.kwargs = dict(kwargs)
    return env


def register_envs() -> None:
    for env_id in ENV_ENTRY_POINTS:
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=partial(make_env, env_id), disable_env_checker=False)


def register_env(env_id: str, env_class: type[gym.Env] | str) -> None:
    """Register an env defined outside this module under `env_id`: with Gymnasium, and as an id the
    server serves (`agentrl serve` builds each id by its entry point). `env_class` is the class, or
    its "module:Class"; either way the server finds it again by that import path, so a class must be
    defined at the top level of an importable module."""
    if isinstance(env_class, str):
        entry_point = env_class
    else:
        if "<locals>" in env_class.__qualname__:
            raise ValueError(f"{env_class.__qualname__} is defined inside a function: the server could not "
                             "import it; define the env class at the top level of a module")
        entry_point = f"{env_class.__module__}:{env_class.__qualname__}"
    known = ENV_ENTRY_POINTS.get(env_id)
    if known is not None and known != entry_point:
        raise ValueError(f"{env_id} is already registered as {known}, not {entry_point}")
    ENV_ENTRY_POINTS[env_id] = entry_point
    register_envs()
