"""Where the sandbox servers of one address are: the shapes of `GET /v1/cluster` and sandbox ids.

Several sandbox servers (`agentrl sandbox serve --processes N`, or one per Ray node) share one
address. Each is a *holder*: a server with its own URL that puts its name at the head of every
sandbox id it makes (`<holder>.<hex>`). The address serves only the map below; a client creates a
sandbox on the holder with the fewest and sends every call on it to the holder its id names, so no
process sits between a client and its sandboxes. Shared by the server side (`processes.py`) and the
client (`cluster.py`); nothing here does I/O.
"""

from __future__ import annotations

import os
import re
from typing import Literal

from pydantic import BaseModel, Field

CLUSTER_PATH = "/v1/cluster"
# the holder a process's cluster clients prefer while it is up (its own node's server, on Ray)
NEAR_ENV_VAR = "AGENTRL_SANDBOX_NEAR"
HOLDER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class SandboxHolderInfo(BaseModel):
    """One sandbox server of a cluster as the address reports it."""

    holder: str = Field(description="Its name, at the head of every sandbox id it makes.")
    url: str = Field(description="Where to send calls on its sandboxes.")
    state: Literal["starting", "up", "down"]
    live_sandboxes: int = Field(0, description="Open sandboxes at its last health check.")


class SandboxClusterMap(BaseModel):
    holders: list[SandboxHolderInfo]


def holder_of(sandbox_id: str) -> str | None:
    """The holder a sandbox id names, or None for an id of a lone server (no `.`)."""
    holder, dot, _ = sandbox_id.partition(".")
    return holder if dot else None


def check_holder_name(name: str) -> str:
    if not HOLDER_NAME.fullmatch(name):
        raise ValueError(f"a holder name is 1-64 letters, digits, '-' or '_', not {name!r}")
    return name


def cpu_count() -> int:
    """The cores this process may run on (`--processes auto`)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
