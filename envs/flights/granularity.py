"""Interaction granularity of Flights-v0: the same desk behind coarser or finer tools.

`FlightsEnv(granularity=...)` builds one of three classes, each with its own tool table (the
first observation lists it); the tasks, the world, the verifier and the desk's own checks are
the same at every level, and `OraclePolicy` plays each.

- "default": the tools of `env.py`.
- "coarse" (`coarse.py`): the lookups plus macros that search and act in one call.
- "fine" (`fine.py`): paged search, and quote, hold, confirm for every write.
"""

from __future__ import annotations

from agentrl.flights.coarse import CoarseFlightsEnv
from agentrl.flights.env import FlightsEnv
from agentrl.flights.fine import FineFlightsEnv

CLASSES: dict[str, type[FlightsEnv]] = {
    "coarse": CoarseFlightsEnv,
    "default": FlightsEnv,
    "fine": FineFlightsEnv,
}
GRANULARITIES = tuple(CLASSES)


def env_class(granularity: str) -> type[FlightsEnv]:
    """The Flights-v0 class of a granularity; a clear error for anything else."""
    if granularity not in CLASSES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, not {granularity!r}")
    return CLASSES[granularity]
