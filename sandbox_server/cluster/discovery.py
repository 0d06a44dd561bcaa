"""Where the sandbox servers of one address are: the shapes of `GET /v1/cluster` and sandbox ids.

Several sandbox servers (`agentrl sandbox serve --processes N`, or one per Ray node) share one
address. Each is a *holder*: a server with its own URL that puts its name at the head of every
sandbox id it makes (`<holder>.<hex>`). The address serves only the map below; a client creates a
sandbox on the holder with the fewest and sends every call on it to the holder its id names, so no
process sits between a client and its sandboxes. Shared by the server side (`processes.py`) and the
client (`clients/cluster.py`); nothing here does I/O. The ids, states and map path are the serving kit's
(`agentrl.serving.names`), as the env servers' are.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from agentrl.serving.children import cpu_count
from agentrl.serving.names import CLUSTER_PATH, HOLDER_NAME, HolderState, check_holder_name, holder_of

# the holder a process's cluster clients prefer while it is up (its own node's server, on Ray)
NEAR_ENV_VAR = "AGENTRL_SANDBOX_NEAR"
__all__ = ["CLUSTER_PATH", "HOLDER_NAME", "NEAR_ENV_VAR", "SandboxClusterMap", "SandboxHolderInfo",
           "check_holder_name", "cpu_count", "holder_of"]


class SandboxHolderInfo(BaseModel):
    """One sandbox server of a cluster as the address reports it."""

    holder: str = Field(description="Its name, at the head of every sandbox id it makes.")
    url: str = Field(description="Where to send calls on its sandboxes.")
    state: HolderState = Field(description="`up` takes new sandboxes; `unresponsive` missed its last "
                               "health checks and takes none until it answers again; `draining` takes "
                               "none and stops once it holds none (or past its drain's bound); `down` "
                               "stopped: its clients replay its sandboxes elsewhere.")
    live_sandboxes: int = Field(default=0, description="Open sandboxes at its last health check.")


class SandboxClusterMap(BaseModel):
    holders: list[SandboxHolderInfo]
