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
import warnings
from collections.abc import Callable, Iterable, Mapping
from functools import cache, partial
from importlib import import_module, metadata
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
    "agentrl/MCP-v0": "agentrl.mcp.env:MCPEnv",
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
    global _plugins_read
    if not _plugins_read:
        _plugins_read = True  # before registering: `register_env` comes back here
        register_plugin_envs()
    for env_id in ENV_ENTRY_POINTS:
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=partial(make_env, env_id), disable_env_checker=False)


# --- envs of other packages ---------------------------------------------------------------------
# A package declares its envs in this entry-point group, one entry per id, `"me/Toy-v0" = "me.env:ToyEnv"`
# (pyproject.toml's `[project.entry-points."agentrl.envs"]`). `import agentrl` registers the ids from
# the installed packages' metadata alone: the env's module is imported only when the env is built.
ENTRY_POINT_GROUP = "agentrl.envs"
# id -> (distribution, version) of the ids registered from another package's entry point
ENV_PACKAGES: dict[str, tuple[str, str]] = {}
_plugins_read = False


def register_plugin_envs() -> None:
    """Register the ids the installed packages declare in the `agentrl.envs` group. An entry that
    cannot be registered (not "module:Class", an id agentrl or another package already has) is
    skipped with a warning naming it and its package: one broken package does not stop the others,
    nor `import agentrl`."""
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = entry.dist
        package = (dist.name, dist.version) if dist is not None else ("(unknown package)", "")
        try:
            if not entry.module or not entry.attr or entry.extras:
                raise ValueError(f"{entry.value!r} is not a \"module:Class\" entry point")
            register_env(entry.name, entry.value)
        except ValueError as exc:
            warnings.warn(f"agentrl: the env {entry.name!r} of the package {package[0]} {package[1]} "
                          f"(entry point group {ENTRY_POINT_GROUP}) is not registered: {exc}",
                          RuntimeWarning, stacklevel=2)
            continue
        ENV_PACKAGES[entry.name] = package


def env_package(env_id: str) -> tuple[str | None, str | None]:
    """The distribution that provides `env_id` and its version, for a client to pin: the package of
    its entry point, else the one installing the top-level module of its class (agentrl's own for
    agentrl's envs); (None, None) for a module no installed package owns (a script's)."""
    if env_id in ENV_PACKAGES:
        return ENV_PACKAGES[env_id]
    top = ENV_ENTRY_POINTS[env_id].partition(":")[0].partition(".")[0]
    for name in _distributions().get(top, ()):
        return name, metadata.version(name)
    return None, None


def import_env_modules(names: Iterable[str]) -> list[str]:
    """Import each module named (`agentrl serve --import`), one that registers envs with Gymnasium
    as it is imported, and make the ids it registered agentrl's too (served, checked); the new ids.
    An id registered by a function rather than a class is built by that function."""
    new: list[str] = []
    for name in names:
        before = set(gym.registry)
        import_module(name)
        for env_id in sorted(set(gym.registry) - before):
            new.append(env_id)
            if env_id in ENV_ENTRY_POINTS:  # registered through `register_env`: agentrl's already
                continue
            entry_point: Any = gym.registry[env_id].entry_point
            if callable(entry_point):
                entry_point = f"{entry_point.__module__}:{getattr(entry_point, '__qualname__', '<unnamed>')}"
            if not isinstance(entry_point, str) or ":" not in entry_point or "<" in entry_point:
                raise ValueError(f"{name} registered {env_id} with the entry point {entry_point!r}, "
                                 "not a \"module:Class\" agentrl can import again")
            register_env(env_id, entry_point)
    return new


@cache
def _distributions() -> Mapping[str, list[str]]:
    """Top-level module -> the distributions installing it (reading every package's file list takes
    a few tenths of a second: once per process)."""
    return metadata.packages_distributions()


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
