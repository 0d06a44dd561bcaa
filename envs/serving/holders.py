"""The holders of one cluster address: their table, their states, and the health watcher that moves them.

Every way of running holders (child processes, Ray actors, servers run by something else) shares
this: a `Holder` per server with its URL, state and load, and `HolderPool`, which checks each
holder's `/health` every `HEALTH_INTERVAL_S` and moves it between the states of `HolderState`:

- `starting` until it first answers, then `up` (it takes new work);
- `unresponsive` once it has missed `MISSES_UNRESPONSIVE` health checks in a row while still running
  (a hung process: the kernel accepts its connections, nothing answers), `up` again when it answers;
- `draining` when asked to take no new work, retired once its load is 0 (or, drained with a bound,
  once the bound is past: its clients then replay what it held on the others);
- `down` when it stopped running (or, for servers run by something else, stopped answering).

Clients create only on `up` holders; calls on work a holder already holds go to it whatever its
state (the client replays that work elsewhere if the holder is gone). The map both servers serve is
`infos()`: an entry per holder in the server's own model (`holder`, `url`, `state`, and its load
under the server's name for it: `live_episodes`, `live_sandboxes`). Subclasses say how holders run
(`_launch`, `_retire`, `_running`, `_lost`); nothing here knows what a holder serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx
from pydantic import BaseModel, Field

from agentrl.serving.names import HolderState

HEALTH_INTERVAL_S = 0.5  # between rounds of health checks
HEALTH_TIMEOUT_S = 5.0  # a health check unanswered for this long is missed
MISSES_UNRESPONSIVE = 2  # missed health checks in a row that make an `up` holder `unresponsive`
MAX_ADD = 64  # holders one scale-up request may add

InfoT = TypeVar("InfoT", bound=BaseModel)


@dataclass
class Holder:
    """A holder as the pool sees it; `handle` is whatever runs it (a process, an actor), `load` what
    it held at its last health check, `misses` the health checks it missed since it last answered."""

    name: str
    url: str
    state: HolderState = "starting"
    load: int = 0
    handle: Any = None
    restarts: int = 0
    misses: int = 0
    drain_until: float | None = None  # a draining holder's bound (`time.monotonic()`): retired past it


class AddHolders(BaseModel):
    """The body of a scale-up (`POST /v1/cluster/holders`), on either server's address."""

    n: int = Field(1, ge=1, le=MAX_ADD, description="How many holders to add.")


class DrainHolder(BaseModel):
    """The body of a drain (`POST /v1/cluster/holders/{name}/drain`), on either server's address."""

    within_s: float | None = Field(None, ge=0, le=86_400, description=(
        "Stop the holder this many seconds from now even if it still holds work (its clients replay "
        "that on the other holders); none: once what it holds is closed or expires."))


class PoolError(Exception):
    """A request to the pool that cannot be done (an unknown holder, a bad count); `code` is the
    error code the server answers with."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass(frozen=True)
class PoolSettings:
    """What makes a pool one server's: `load_field` names the load in a holder's `/health` answer
    and in its map entry; `environment` is what every holder starts with (None: unset); `headers` go
    with every health check; `log`, `noun` and `held` word what is logged."""

    load_field: str
    log: logging.Logger
    environment: Mapping[str, str | None] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    noun: str = "holder"
    held: str = "episodes"


class HolderPool(Generic[InfoT]):
    """The holders of one cluster and the loop that watches them (see the module docstring).

    `info` is the server's model of one map entry; `settings` what else makes it one server's pool.
    """

    watches_down = False  # whether a `down` holder is still checked (and `up` again when it answers)

    def __init__(self, info: type[InfoT], settings: PoolSettings) -> None:
        self.holders: dict[str, Holder] = {}
        self.info_model = info
        self.settings = settings
        self.log, self.noun, self.held = settings.log, settings.noun, settings.held
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
        holder.state, holder.load = "down", 0

    # --- the map -------------------------------------------------------------------------------
    def info(self, holder: Holder) -> InfoT:
        """`holder` as the map shows it."""
        return self.info_model.model_validate({"holder": holder.name, "url": holder.url,
                                               "state": holder.state, self.settings.load_field: holder.load})

    def infos(self) -> list[InfoT]:
        return [self.info(h) for h in self.holders.values()]

    def health(self) -> dict[str, Any]:
        """The address's own `/health`: healthy once a holder is up."""
        up = sum(h.state == "up" for h in self.holders.values())
        return {"status": "healthy" if up else "starting", "holders_up": up}

    # --- the pool ------------------------------------------------------------------------------
    async def start(self, count: int) -> None:
        self._http = httpx.AsyncClient(timeout=HEALTH_TIMEOUT_S, headers=dict(self.settings.headers))
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

    async def add(self, count: int) -> list[InfoT]:
        """Scale up: `count` new holders, which take new work once they answer."""
        if not 1 <= count <= MAX_ADD:
            raise PoolError(422, "invalid_request", f"n must be between 1 and {MAX_ADD}")
        made = await self._launch(count)
        for holder in made:
            self.holders[holder.name] = holder
        return [self.info(h) for h in made]

    async def drain(self, name: str, within_s: float | None = None) -> InfoT:
        """Take no new work on `name`; it stops once what it holds is closed or expires, or, with
        `within_s`, once that many seconds are past, holding what it holds: its clients replay that
        on the other holders (a rolling restart must end; a client's episode may not)."""
        holder = self.holders.get(name)
        if holder is None:
            known = ", ".join(self.holders) or "none"
            raise PoolError(404, "not_found", f"no holder {name!r}; holders: {known}")
        if holder.state in ("starting", "up", "unresponsive"):
            holder.state = "draining"
            holder.drain_until = None if within_s is None else time.monotonic() + within_s
            self.log.info("%s %s draining (%d live %s)", self.noun, name, holder.load, self.held)
        return self.info(holder)

    async def wait_up(self, timeout_s: float) -> None:
        """Until every holder has answered once (or is down); raises TimeoutError past `timeout_s`."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while any(h.state == "starting" for h in self.holders.values()):
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"holders not up after {timeout_s} s")
            await asyncio.sleep(0.05)

    # --- the health watcher --------------------------------------------------------------------
    async def _watch_forever(self) -> None:
        """A check of each holder every `HEALTH_INTERVAL_S`, each holder's apart: a hung holder's
        check waits out its `HEALTH_TIMEOUT_S` without holding up the others'. A check that fails
        (a bug, not a missed answer) ends the watch with its error."""
        checks: dict[str, asyncio.Task[None]] = {}
        try:
            while True:
                for holder in list(self.holders.values()):
                    check = checks.get(holder.name)
                    if check is not None and not check.done():
                        continue
                    if check is not None:
                        check.result()
                    checks[holder.name] = asyncio.get_running_loop().create_task(self._check(holder))
                await asyncio.sleep(HEALTH_INTERVAL_S)
        finally:
            for check in checks.values():
                check.cancel()
            for outcome in await asyncio.gather(*checks.values(), return_exceptions=True):
                if isinstance(outcome, Exception):  # a check that failed after the loop's last look
                    self.log.error("a health check failed as the watch stopped", exc_info=outcome)

    async def _check(self, holder: Holder) -> None:
        if holder.state == "down" and not self.watches_down:
            return
        if not self._running(holder):
            self.log.warning("%s %s (%s) stopped", self.noun, holder.name, holder.url)
            await self._lost(holder)
            return
        assert self._http is not None
        try:
            health = (await self._http.get(f"{holder.url}/health")).raise_for_status().json()
        except (httpx.HTTPError, ValueError) as exc:
            self._missed(holder, exc)
            return
        await self._answered(holder, health)

    def _missed(self, holder: Holder, why: BaseException) -> None:
        """A health check unanswered: a holder starting is still starting; an `up` one that misses
        `MISSES_UNRESPONSIVE` in a row is `unresponsive` (whether it still runs is `_running`'s to say)."""
        holder.misses += 1
        if holder.state == "up" and holder.misses >= MISSES_UNRESPONSIVE:
            holder.state = "unresponsive"
            self.log.warning("%s %s (%s) missed %d health checks in a row (%s); it takes no new %s until "
                             "it answers", self.noun, holder.name, holder.url, holder.misses,
                             type(why).__name__, self.held)

    async def _answered(self, holder: Holder, health: dict[str, Any]) -> None:
        if holder.state == "unresponsive":
            self.log.warning("%s %s answers again after %d missed health checks", self.noun, holder.name,
                             holder.misses)
        holder.misses = 0
        holder.load = int(health.get(self.settings.load_field, 0))
        if holder.state in ("starting", "unresponsive", "down"):
            holder.state = "up"
        elif holder.state == "draining" and (holder.load == 0 or _past(holder.drain_until)):
            if holder.load:
                self.log.warning("%s %s still holds %d %s past its drain's bound; stopping it, its clients "
                                 "replay them elsewhere", self.noun, holder.name, holder.load, self.held)
            else:
                self.log.info("%s %s drained; stopping it", self.noun, holder.name)
            holder.state, holder.load = "down", 0  # what it still held is replayed elsewhere
            await self._retire(holder)


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() > deadline


def lifespan(pool: HolderPool[Any], count: int) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """The lifespan of the app serving a pool's address (`FastAPI(lifespan=...)`): `count` holders
    started when it starts serving, every holder stopped when it stops."""

    @contextlib.asynccontextmanager
    async def serving(app: Any) -> AsyncIterator[None]:
        await pool.start(count)
        try:
            yield
        finally:
            await pool.stop()

    return serving
