"""Interaction granularity of Flights-v0: the same desk behind coarser or finer tools.

Each level is a class with its own tool table (the first observation lists it);
`make_flights_env(granularity=...)`, the constructor `gym.make("agentrl/Flights-v0", ...)` calls,
builds the level's class. The tasks, the world, the verifier and the desk's own checks are the
same at every level, and `OraclePolicy` plays each.

- "default": the tools of `desk_tools.py`.
- "coarse" (`coarse.py`): the lookups plus macros that search and act in one call.
- "fine" (`fine.py`): paged search, and quote, hold, confirm for every write.
"""

from __future__ import annotations

from typing import Any

from agentrl.flights.coarse import CoarseFlightsEnv
from agentrl.flights.env import GRANULARITIES, FlightsEnv
from agentrl.flights.fine import FineFlightsEnv

# in the order of GRANULARITIES (tests/flights/test_granularity.py checks that each level has its class)
CLASSES: dict[str, type[FlightsEnv]] = {
    cls.granularity: cls for cls in (CoarseFlightsEnv, FlightsEnv, FineFlightsEnv)
}

__all__ = ["CLASSES", "GRANULARITIES", "env_class", "make_flights_env"]


def env_class(granularity: str) -> type[FlightsEnv]:
    """The Flights-v0 class of a granularity; a clear error for anything else."""
    if granularity not in CLASSES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, not {granularity!r}")
    return CLASSES[granularity]


def make_flights_env(*, granularity: str | None = None, **kwargs: Any) -> FlightsEnv:
    """A Flights-v0 env of `granularity` ("coarse" | "default" | "fine"; None is "default"); the other
    `kwargs` are the constructor's (`FlightsEnv`)."""
    cls = env_class("default" if granularity is None else granularity)
    return cls(granularity=granularity, **kwargs)
