"""What the map of a cluster and its ids say, with no I/O and no dependency: shared by the servers
that serve the map and the clients that route by it.

A holder puts its name at the head of every id it makes (`<holder>.<rest>`), so a client sends every
call on an id to the holder the id names; an id with no `.` is a lone server's. A holder's `state`
in the map is one of `HolderState` (what each means: `agentrl.serving.holders`); clients create only
on `up` holders.
"""

from __future__ import annotations

import re
from typing import Literal

CLUSTER_PATH = "/v1/cluster"  # where the address of a cluster serves its map
HolderState = Literal["starting", "up", "unresponsive", "draining", "down"]
HOLDER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def holder_of(made_id: str) -> str | None:
    """The holder an id names, or None for an id of a lone server (no `.`)."""
    holder, dot, _ = made_id.partition(".")
    return holder if dot else None


def check_holder_name(name: str) -> str:
    if not HOLDER_NAME.fullmatch(name):
        raise ValueError(f"a holder name is 1-64 letters, digits, '-' or '_', not {name!r}")
    return name
