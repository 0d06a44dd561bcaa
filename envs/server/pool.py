"""Several server processes behind one address: the holders, their states, and the discovery app.

A cluster is N copies of the unchanged server app, each a *holder* with its own URL that puts its
name at the head of every episode id it creates. Nothing routes the episode traffic: the address a
user is given serves only `GET /v1/cluster` (the holders, their URLs, states and loads), and the
cluster client (`agentrl.cluster_client`) talks to each holder directly, its `/v1/ws` included, so
no process sits between a rollout worker and its episode. Plain HTTP clients do the same: read the
map, create on a holder, send every call naming an episode to the holder its id names.

`HolderPool` is what every way of running holders shares (their states, the health checks that
read their loads and retire a drained holder once its last episode is gone); `agentrl.server.processes`
runs them as child processes, `agentrl.server.ray_pool` as Ray actors.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.responses import Response
from pydantic import BaseModel, Field

from agentrl import __version__
from agentrl.flights.task_ids import KEY_VARIABLE
from agentrl.protocol import CLUSTER_PATH, ClusterMap, ErrorCode, HolderInfo, dumps
from agentrl.server.app import GuardMiddleware, _error_response
from agentrl.server.config import OPERATOR_TOKEN_ENV_VAR, TOKEN_ENV_VAR
from agentrl.server.metrics import Metrics

log = logging.getLogger("agentrl.server")
HEALTH_INTERVAL_S = 0.5
MAX_ADD = 64  # holders one scale-up request may add


@dataclass
class Holder:
    """A holder as the pool sees it; `handle` is whatever runs it (a process, an actor)."""

    name: str
    url: str
    state: str = "starting"
    live_episodes: int = 0
    handle: Any = None
    restarts: int = 0

    def info(self) -> HolderInfo:
        return HolderInfo(holder=self.name, url=self.url, state=self.state,  # type: ignore[arg-type]  # one of its states
                          live_episodes=self.live_episodes)


class PoolError(Exception):
    """A request to the pool that cannot be done (an unknown holder, a bad count)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def holder_environment(token: str | None, operator_token: str | None = None) -> dict[str, str]:
    """The environment variables every holder of one cluster starts with: the API and operator
    tokens, and one
    Flights-v0 task-id key (`AGENTRL_TASK_ID_KEY`, the operator's if set, else drawn here once).

    Each holder is a process of its own, and a process without a configured key draws its own
    (`agentrl.flights.task_ids`): the same task would then have another id on every holder, and a
    trainer's ledger of task ids would miss a train/eval overlap behind one cluster address. A holder
    restarted after a crash gets the same variables, so ids stay the same across restarts too."""
    env = {KEY_VARIABLE: os.environ.get(KEY_VARIABLE) or secrets.token_hex(32)}
    if token:
        env[TOKEN_ENV_VAR] = token
    if operator_token:
        env[OPERATOR_TOKEN_ENV_VAR] = operator_token
    return env


class HolderPool:
    """The holders of one cluster and the loop that watches them.

    Subclasses start and stop holders (`_launch`, `_retire`) and say whether one is still running
    (`_running`); the pool checks each holder's `/health` every `HEALTH_INTERVAL_S`, marks it `up`
    once it answers, reads its live episodes, reports a holder that stopped running (`down`, logged),
    and retires a `draining` holder once it holds no episode.
    """

    def __init__(self, token: str | None = None, operator_token: str | None = None) -> None:
        self.holders: dict[str, Holder] = {}
        self.token = token
        self.holder_env = holder_environment(token, operator_token)
        self._watch: asyncio.Task | None = None
        self._http: httpx.AsyncClient | None = None

    # --- what runs holders ---------------------------------------------------------------------
    async def _launch(self, count: int) -> list[Holder]:
        raise NotImplementedError

    async def _retire(self, holder: Holder) -> None:
        raise NotImplementedError

    def _running(self, holder: Holder) -> bool:
        raise NotImplementedError

    async def _lost(self, holder: Holder) -> None:
        """A holder stopped running on its own: reported `down` (subclasses may start it again)."""
        holder.state, holder.live_episodes = "down", 0

    # --- the pool ------------------------------------------------------------------------------
    def snapshot(self) -> ClusterMap:
        return ClusterMap(holders=[h.info() for h in self.holders.values()])

    async def start(self, count: int) -> None:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self._http = httpx.AsyncClient(timeout=5.0, headers=headers)
        await self.add(count)
        self._watch = asyncio.get_running_loop().create_task(self._watch_forever())

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        await asyncio.gather(*(self._retire(h) for h in self.holders.values() if h.state != "down"))
        for holder in self.holders.values():
            holder.state = "down"
        if self._http is not None:
            await self._http.aclose()

    async def add(self, count: int) -> list[HolderInfo]:
        """Scale up: `count` new holders, which take new episodes once they answer."""
        if not 1 <= count <= MAX_ADD:
            raise PoolError(422, ErrorCode.INVALID_REQUEST, f"n must be between 1 and {MAX_ADD}")
        made = await self._launch(count)
        for holder in made:
            self.holders[holder.name] = holder
        return [h.info() for h in made]

    async def drain(self, name: str) -> HolderInfo:
        """Take no new episodes on `name`; it stops once its live episodes are closed or expire."""
        holder = self.holders.get(name)
        if holder is None:
            raise PoolError(404, ErrorCode.NOT_FOUND,
                            f"no holder {name!r}; holders: {', '.join(self.holders) or 'none'}")
        if holder.state in ("starting", "up"):
            holder.state = "draining"
            log.info("holder %s draining (%d live episodes)", name, holder.live_episodes)
        return holder.info()

    async def wait_up(self, timeout_s: float) -> None:
        """Until every holder has answered once (or is down); raises TimeoutError past `timeout_s`."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while any(h.state == "starting" for h in self.holders.values()):
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"holders not up after {timeout_s} s")
            await asyncio.sleep(0.05)

    async def _watch_forever(self) -> None:
        while True:
            await asyncio.gather(*(self._check(h) for h in list(self.holders.values())))
            await asyncio.sleep(HEALTH_INTERVAL_S)

    async def _check(self, holder: Holder) -> None:
        if holder.state == "down":
            return
        if not self._running(holder):
            log.warning("holder %s (%s) stopped", holder.name, holder.url)
            await self._lost(holder)
            return
        assert self._http is not None
        try:
            health = (await self._http.get(f"{holder.url}/health")).json()
        except (httpx.HTTPError, ValueError):
            return  # starting, or busy for a moment: whether it runs is `_running`'s to say
        holder.live_episodes = int(health.get("live_episodes", 0))
        if holder.state == "starting":
            holder.state = "up"
        elif holder.state == "draining" and holder.live_episodes == 0:
            log.info("holder %s drained; stopping it", holder.name)
            holder.state = "down"
            await self._retire(holder)


class AddHolders(BaseModel):
    n: int = Field(1, ge=1, le=MAX_ADD, description="How many holders to add.")


def cluster_app(pool: HolderPool, count: int, token: str | None) -> FastAPI:
    """The address a cluster is given: discovery (`GET /v1/cluster`), scale-up and drain.

    It starts `count` holders when it starts serving, and stops every holder when it stops.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await pool.start(count)
        try:
            yield
        finally:
            await pool.stop()

    app = FastAPI(title="agentrl cluster", version=__version__, lifespan=lifespan,
                  description="Where the holders of an agentrl cluster are; episodes go to them directly.")

    @app.exception_handler(PoolError)
    async def pool_error(request: Any, exc: PoolError) -> Response:
        return _error_response(exc.status, exc.code, exc.message)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        up = sum(h.state == "up" for h in pool.holders.values())
        return {"status": "healthy" if up else "starting", "holders_up": up}

    @app.get(CLUSTER_PATH, response_model=ClusterMap)
    async def cluster() -> Response:
        return Response(dumps(pool.snapshot().model_dump()), media_type="application/json")

    @app.post(f"{CLUSTER_PATH}/holders", response_model=ClusterMap, status_code=201)
    async def add(req: AddHolders) -> ClusterMap:
        return ClusterMap(holders=await pool.add(req.n))

    @app.post(f"{CLUSTER_PATH}/holders/{{holder}}/drain", response_model=HolderInfo)
    async def drain(holder: str) -> HolderInfo:
        return await pool.drain(holder)

    app.add_middleware(GuardMiddleware, token=token, max_body_bytes=1 << 16, metrics=Metrics())
    return app


class StaticPool(HolderPool):
    """Holders run by something else (a Kubernetes StatefulSet, a service manager), named with their
    URLs: the pool only watches them. A holder that stops answering its health check is `down`
    until it answers again; scale-up is whatever runs them (`add` is refused)."""

    def __init__(self, holders: dict[str, str], token: str | None = None) -> None:
        super().__init__(token)
        self.given = holders
        self.failures: dict[str, int] = {}

    async def _launch(self, count: int) -> list[Holder]:
        if self.holders:
            raise PoolError(409, ErrorCode.INVALID_REQUEST, "these holders are run by something else: "
                            "scale that (a StatefulSet's replicas, say) and list the new ones")
        return [Holder(name, url.rstrip("/")) for name, url in self.given.items()]

    def _running(self, holder: Holder) -> bool:
        return True

    async def _check(self, holder: Holder) -> None:
        assert self._http is not None
        try:
            ok = (await self._http.get(f"{holder.url}/health")).status_code == 200
        except httpx.HTTPError:
            ok = False
        if not ok:
            self.failures[holder.name] = self.failures.get(holder.name, 0) + 1
            if self.failures[holder.name] >= 3 and holder.state != "draining":
                holder.state, holder.live_episodes = "down", 0
            return
        self.failures[holder.name] = 0
        if holder.state == "down":
            holder.state = "starting"
        await super()._check(holder)

    async def _retire(self, holder: Holder) -> None:
        """A drained holder is left running: whatever runs it stops it."""
