"""Several server processes behind one address: the holders, their states, and the discovery app.

A cluster is N copies of the unchanged server app, each a *holder* with its own URL that puts its
name at the head of every episode id it creates. Nothing routes the episode traffic: the address a
user is given serves only `GET /v1/cluster` (the holders, their URLs, states and loads), and the
cluster client (`agentrl.client.cluster`) talks to each holder directly, its `/v1/ws` included, so
no process sits between a rollout worker and its episode. Plain HTTP clients do the same: read the
map, create on a holder, send every call naming an episode to the holder its id names.

The holders' table, states and health watcher are the serving kit's (`agentrl.serving.holders`,
shared with the sandbox server); `HolderPool` here is that pool for env servers (their map entries,
tokens and cluster secret), which `agentrl.server.cluster.processes` runs as child processes,
`agentrl.server.cluster.ray_pool` as Ray actors, and `StaticPool` only watches.
"""

from __future__ import annotations

import logging
import os
import secrets
from typing import Any

from fastapi import FastAPI
from fastapi.responses import Response

from agentrl import __version__
from agentrl.core.cluster_secret import VARIABLE as SECRET_VARIABLE
from agentrl.protocol import CLUSTER_PATH, ClusterMap, ErrorCode, HolderInfo, dumps
from agentrl.server.app import GuardMiddleware, _error_response
from agentrl.server.config import OPERATOR_TOKEN_ENV_VAR, TOKEN_ENV_VAR
from agentrl.server.metrics import Metrics
from agentrl.serving import holders as cluster_holders
from agentrl.serving.holders import (
    MAX_ADD,
    AddHolders,
    DrainHolder,
    Holder,
    PoolError,
    PoolSettings,
    lifespan,
)

log = logging.getLogger("agentrl.server")
MISSES_DOWN = 3  # health checks in a row a holder run by something else misses before it is `down`
__all__ = ["MAX_ADD", "Holder", "HolderPool", "PoolError", "StaticPool", "cluster_app", "holder_environment"]


def holder_environment(token: str | None, operator_token: str | None = None) -> dict[str, str]:
    """The environment variables every holder of one cluster starts with: this process's agentrl
    settings (`AGENTRL_*`, which a child process inherits anyway and a Ray actor on another node
    would not), the API and operator tokens, and one cluster secret (`AGENTRL_CLUSTER_SECRET`, the
    operator's if set, else drawn here once).

    Each holder is a process of its own, and a process without the secret draws its own
    (`agentrl.core.cluster_secret`): what an env names with a key derived from it (Flights-v0's
    task ids) would then have another name on every holder, and a trainer's ledger of task ids
    would miss a train/eval overlap behind one cluster address. A holder restarted after a crash
    gets the same variables, so names stay the same across restarts too."""
    env = {name: value for name, value in os.environ.items() if name.startswith("AGENTRL_")}
    env[SECRET_VARIABLE] = os.environ.get(SECRET_VARIABLE) or secrets.token_hex(32)
    if token:
        env[TOKEN_ENV_VAR] = token
    if operator_token:
        env[OPERATOR_TOKEN_ENV_VAR] = operator_token
    return env


def pool_settings(token: str | None, environment: dict[str, str]) -> PoolSettings:
    """What makes a pool of the serving kit one of env servers: its load (`live_episodes`), the
    holders' `environment` (`holder_environment`), and the token its health checks carry."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return PoolSettings("live_episodes", log, environment, headers)


class HolderPool(cluster_holders.HolderPool[HolderInfo]):
    """The holders of one cluster of env servers and the loop that watches them
    (`agentrl.serving.holders`); subclasses say how holders run (`_launch`, `_retire`, `_running`)."""

    def __init__(self, token: str | None = None, operator_token: str | None = None) -> None:
        self.holder_env = holder_environment(token, operator_token)
        super().__init__(HolderInfo, pool_settings(token, self.holder_env))
        self.token = token


def cluster_app(pool: cluster_holders.HolderPool[HolderInfo], count: int, token: str | None,
                operator_token: str | None = None) -> FastAPI:
    """The address a cluster is given: discovery (`GET /v1/cluster`), scale-up and drain.

    It starts `count` holders when it starts serving, and stops every holder when it stops. It takes
    the holders' tokens: the API token, and the operator token, with which an operator reads the map
    and drives a cluster client as on each holder.
    """

    app = FastAPI(title="agentrl cluster", version=__version__, lifespan=lifespan(pool, count),
                  description="Where the holders of an agentrl cluster are; episodes go to them directly.")

    @app.exception_handler(PoolError)
    async def pool_error(request: Any, exc: PoolError) -> Response:
        return _error_response(exc.status, exc.code, exc.message)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return pool.health()

    @app.get(CLUSTER_PATH, response_model=ClusterMap)
    async def cluster() -> Response:
        return Response(dumps(ClusterMap(holders=pool.infos()).model_dump()), media_type="application/json")

    @app.post(f"{CLUSTER_PATH}/holders", response_model=ClusterMap, status_code=201)
    async def add(req: AddHolders) -> ClusterMap:
        return ClusterMap(holders=await pool.add(req.n))

    @app.post(f"{CLUSTER_PATH}/holders/{{holder}}/drain", response_model=HolderInfo)
    async def drain(holder: str, req: DrainHolder | None = None) -> HolderInfo:
        return await pool.drain(holder, None if req is None else req.within_s)

    app.add_middleware(GuardMiddleware, token=token, max_body_bytes=1 << 16, metrics=Metrics(),
                       operator_token=operator_token)
    return app


class StaticPool(HolderPool):
    """Holders run by something else (a Kubernetes StatefulSet, a service manager), named with their
    URLs: the pool only watches them. A holder that misses `MISSES_DOWN` health checks in a row is
    `down` (`unresponsive` before that) until it answers again; scale-up is whatever runs them (`add`
    is refused)."""

    watches_down = True

    def __init__(self, holders: dict[str, str], token: str | None = None) -> None:
        super().__init__(token)
        self.given = holders

    async def _launch(self, count: int) -> list[Holder]:
        if self.holders:
            raise PoolError(409, ErrorCode.INVALID_REQUEST, "these holders are run by something else: "
                            "scale that (a StatefulSet's replicas, say) and list the new ones")
        return [Holder(name, url.rstrip("/")) for name, url in self.given.items()]

    def _running(self, holder: Holder) -> bool:
        return True

    def _missed(self, holder: Holder, why: BaseException) -> None:
        super()._missed(holder, why)
        if holder.misses >= MISSES_DOWN and holder.state != "draining":
            holder.state, holder.load = "down", 0

    async def _retire(self, holder: Holder) -> None:
        """A drained holder is left running: whatever runs it stops it."""
