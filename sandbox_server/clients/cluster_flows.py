"""The sandbox cluster client's flows, with no I/O: where a sandbox goes, and how a lost one is rebuilt.

`_Routes` holds the holder map and picks the usable holder with the fewest open sandboxes; `_Recipe`
is one sandbox's record (how it was created, every call that can change it, a digest of each answer)
and replays it on another holder when its own is lost, raising `SandboxLost` where an answer differs.
Each flow is a generator that yields a `_Request` (on the map, a holder's client, or a sandbox) and is
sent its outcome, so the sync and async clients (`cluster.SandboxCluster`, `cluster.AsyncSandboxCluster`)
drive the same flows, each with its own I/O; kept apart from them so that the rules of routing and
replay are read, and changed, in one place.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import httpx

from agentrl.sandbox_server.cluster.discovery import CLUSTER_PATH, SandboxHolderInfo
from agentrl.sandbox_server.wire.errors import AtCapacity, SandboxDead, SandboxError, SandboxNotFound
from agentrl.sandbox_server.wire.models import ExecResult, RelayResult
from agentrl.serving.flows import LOST_GRACE_S as LOST_GRACE_S  # the grace is the kit's, named here too
from agentrl.serving.flows import READ_POLL_S, ClientMap

REFRESH_S = 2.0  # how old the holder map may be when a sandbox is created
START_WAIT_S = 30.0  # how long a create waits for a server starting (a restart) when none is up
WAIT_S = 0.2  # between reads of the map meanwhile
DISCOVERY_WAIT_S = 10.0  # a client with no map yet tries the address again for this long
MAX_TRIES = 3  # holders tried in turn for one create or one replay
# the operations of a remote sandbox (`RemoteSandbox`) that can change it: a replay makes them again
# (a relay talks to a process in the sandbox, which may change what it holds)
CHANGING_OPS = frozenset({"exec", "run_code", "relay", "reset_processes", "write_file", "put_archive"})
RequestOutcome = Any  # a request's result, or the exception it raised


class SandboxLost(SandboxDead):
    """A sandbox's server was lost and the sandbox could not be rebuilt exactly on another one.

    `reason` says why (an answer that differs on replay, no server left). Only DELETE still works
    on it (a no-op): it is a dead sandbox to its caller.
    """

    kind = "sandbox_lost"

    def __init__(self, sandbox_id: str, reason: str) -> None:
        super().__init__(f"sandbox {sandbox_id} was lost with its server: {reason}")
        self.sandbox_id = sandbox_id
        self.reason = reason


@dataclass
class _Request:
    """What a flow needs done: `on` is "map", "wait" (`seconds`), "holder" (then `holder` names it)
    or "sandbox"."""

    on: str
    method: str = ""
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    holder: str = ""
    sandbox: Any = None
    seconds: float = WAIT_S


def _digest(result: Any) -> bytes | None:
    """What a replayed answer must equal: everything an exec or a relay answers but its duration."""
    if isinstance(result, ExecResult | RelayResult):
        text = result.model_dump_json(exclude={"duration_ms"})
    elif isinstance(result, bytes):
        return hashlib.blake2b(result, digest_size=16).digest()
    elif result is None:
        return None
    else:
        text = repr(result)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _holder_gone(outcome: RequestOutcome) -> bool:
    """Whether an outcome says the sandbox's server is gone (or came back without its sandboxes)."""
    if isinstance(outcome, httpx.ReadTimeout | httpx.WriteTimeout | httpx.PoolTimeout):
        return False  # a slow answer from a server that may well be alive: the caller's to judge
    if isinstance(outcome, httpx.TransportError):
        return True
    return isinstance(outcome, SandboxNotFound) and str(outcome).endswith("no such sandbox")


class _Routes(ClientMap[SandboxHolderInfo]):
    """The holder map as last read and this client's own counts (the serving kit's `ClientMap`,
    `own` counting the sandboxes this client created on each holder and holds), no I/O: see the
    module docstring."""

    def __init__(self, url: str, near: str | None = None) -> None:
        super().__init__()
        self.near = near
        url = url.rstrip("/")
        self.base = url[: -len(CLUSTER_PATH)] if url.endswith(CLUSTER_PATH) else url
        self.map_misses = 0  # reads of the map that failed while the map already known was kept

    def refresh(self, force: bool = False) -> Generator[_Request, RequestOutcome, None]:
        if not force and time.monotonic() - self.read_at < REFRESH_S:
            return
        yield from self.read_once(self._read_map(), _Request("wait", seconds=READ_POLL_S), DISCOVERY_WAIT_S)

    def _read_map(self) -> Generator[_Request, RequestOutcome, None]:
        """One read of the map (tried again for `DISCOVERY_WAIT_S` while none is known)."""
        got = yield _Request("map")
        started = time.monotonic()
        while isinstance(got, httpx.TransportError) and not self.map:  # no map yet: tried again
            if time.monotonic() + WAIT_S - started > DISCOVERY_WAIT_S:
                raise SandboxError(f"the sandbox cluster's address {self.base} did not answer through "
                                   f"{DISCOVERY_WAIT_S:g} s of tries: {type(got).__name__}: {got}") from got
            yield _Request("wait")
            got = yield _Request("map")
        if isinstance(got, httpx.TransportError):  # a map is known: carry on with it until the next read
            self.map_misses += 1  # (a server gone meanwhile shows itself by its own calls)
        elif isinstance(got, BaseException):
            raise got
        else:
            self.map = {h.holder: h for h in got.holders}
        self.read_at = time.monotonic()

    def pick(self) -> Generator[_Request, RequestOutcome, str]:
        """The usable holder with the fewest open sandboxes, this client's creates since the map
        was read counted."""
        yield from self.refresh()
        choices = [n for n in self.map if self.usable(n)]
        deadline = time.monotonic() + START_WAIT_S
        while not choices:  # a server restarting (or just lost) may be up again in a moment
            yield from self.refresh(force=True)
            choices = [n for n in self.map if self.usable(n)]
            waiting = any(h.state == "starting" or n in self.lost_at for n, h in self.map.items()
                          if h.state != "down")
            if choices or not waiting or time.monotonic() > deadline:
                break
            yield _Request("wait")
        if not choices:
            raise AtCapacity(f"no sandbox server of {self.base} is up (holders: {self.states()})")
        if self.near is not None and self.near in choices:
            return self.near
        return min(choices, key=lambda n: (self.map[n].live_sandboxes + self.own.get(n, 0), n))

    def lose(self, name: str) -> None:
        self.lost_at[name] = time.monotonic()
        self.read_at = -1e9  # read the map again at the next pick

    def create(self, kwargs: dict[str, Any]) -> Generator[_Request, RequestOutcome, tuple[str, Any]]:
        """A new sandbox on a usable holder: (its holder, the holder client's sandbox)."""
        got: RequestOutcome = None
        for _ in range(MAX_TRIES):
            name = yield from self.pick()
            self.took(name)  # counted now: creates in flight spread too
            got = yield _Request("holder", "create", kwargs=kwargs, holder=name)
            if isinstance(got, BaseException):
                self.drop(name)
                if isinstance(got, httpx.TransportError | AtCapacity):
                    self.lose(name)
                    continue
                raise got
            return name, got
        assert isinstance(got, BaseException)
        raise got


class _Recipe:
    """One sandbox of a cluster client: where it is now and what rebuilds it."""

    def __init__(self, routes: _Routes, holder: str, inner: Any, create: dict[str, Any]) -> None:
        self.routes = routes
        self.holder = holder
        self.inner = inner  # the holder client's sandbox
        self.sandbox_id: str = inner.sandbox_id  # the id the caller knows, whatever holds it now
        self.create = create
        self.ops: list[tuple[str, tuple[Any, ...], dict[str, Any], bytes | None]] = []
        self.replays = 0
        self.lost: SandboxLost | None = None

    def call(self, method: str, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Generator[_Request, RequestOutcome, Any]:
        if self.lost is not None:
            raise self.lost
        for attempt in range(MAX_TRIES + 1):
            got = yield _Request("sandbox", method, args, kwargs, sandbox=self.inner)
            if not _holder_gone(got):
                break
            self.routes.lose(self.holder)
            if attempt == MAX_TRIES:
                yield from self._give_up(f"its server was lost {MAX_TRIES + 1} times in a row")
            yield from self._replay()
        if isinstance(got, BaseException):
            raise got
        if method in CHANGING_OPS:
            self.ops.append((method, args, kwargs, _digest(got)))
        return got

    def close(self) -> Generator[_Request, RequestOutcome, None]:
        self.routes.drop(self.holder)
        if self.lost is not None:
            return
        got = yield _Request("sandbox", "close", sandbox=self.inner)
        if isinstance(got, BaseException) and not _holder_gone(got):
            raise got

    def _replay(self) -> Generator[_Request, RequestOutcome, None]:
        """Rebuild the sandbox on another holder from its recipe, checking every answer."""
        for _ in range(MAX_TRIES):
            try:
                name, fresh = yield from self.routes.create(self.create)
            except (httpx.TransportError, AtCapacity) as exc:
                yield from self._give_up(f"no server could take its replay ({exc})")
            replayed = True
            for step, (method, args, kwargs, digest) in enumerate(self.ops, 1):
                got = yield _Request("sandbox", method, args, kwargs, sandbox=fresh)
                if _holder_gone(got):
                    self.routes.lose(name)
                    self.routes.drop(name)
                    replayed = False
                    break
                if isinstance(got, BaseException) or _digest(got) != digest:
                    yield _Request("sandbox", "close", sandbox=fresh)  # whatever it answers
                    self.routes.drop(name)
                    what = (f"{type(got).__name__}: {got}" if isinstance(got, BaseException)
                            else "a different answer")
                    yield from self._give_up(f"replayed on another server, call {step} ({method} "
                                             f"{str(args[0])[:60] if args else ''!r}) gave {what}: "
                                             "its result depends on more than the calls before it")
            if replayed:
                self.routes.drop(self.holder)
                self.holder, self.inner = name, fresh
                self.replays += 1
                return
        yield from self._give_up(f"no server could take its replay in {MAX_TRIES} tries")

    def _give_up(self, reason: str) -> Generator[_Request, RequestOutcome, None]:
        self.routes.drop(self.holder)
        self.lost = SandboxLost(self.sandbox_id, reason)
        raise self.lost
        yield  # a generator, like every flow
