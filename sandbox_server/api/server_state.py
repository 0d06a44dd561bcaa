"""What the sandbox server's routes share: tenants, lanes, quotas and the one admission path.

Each sandbox's calls go through its own lane (one call at a time, as its agent is serial; the excess
waits without a thread and beyond `max_pending` is answered 429); an exec then waits for the agent on
the event loop (`AgentLink.acall`), other blocking backend calls in a worker thread of their own.
Creates and /run_code have limiters of their own, and DELETE needs none, so no sandbox can starve
another, or the server. A call reads its body only
once it has its turn, and big ones take a heavy slot (admission.py): memory is bounded by the
operator's settings, not by what requests carry.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hmac
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any, TypeVar

import anyio
from fastapi import HTTPException, Request, Response
from pydantic import BaseModel

from agentrl.sandbox_server.api.admission import (
    LIGHT_BYTES,
    Admission,
    HeldResponse,
    declared_length,
    in_thread,
)
from agentrl.sandbox_server.api.metrics import SandboxMetrics
from agentrl.sandbox_server.api.run_code import RunCodeService
from agentrl.sandbox_server.sandboxes.backend import Backend
from agentrl.sandbox_server.sandboxes.sandbox import AgentSandbox
from agentrl.sandbox_server.wire.errors import Busy, QuotaExceeded, SandboxDead, SandboxNotFound
from agentrl.sandbox_server.wire.models import DEFAULT_IMAGE

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


def big_body(request: Request) -> bool:
    """Whether a request may carry more than a light call holds (an unknown length may)."""
    declared = declared_length(request)
    return declared is None or declared > LIGHT_BYTES


class ServerState:
    """One server's shared state; `create_app` keeps it as `app.state.server` for the routes."""

    def __init__(
        self,
        backend: Backend,
        *,
        tenants: dict[str, str],
        allowed_images: Iterable[str],
        quotas: dict[str, int],
        admission: Admission,
        max_request_bytes: int,
        max_pending: int,
        max_creates: int,
        max_run_code: int,
    ):
        self.backend = backend
        self.tenants = tenants
        self.quotas = quotas
        self.images = {getattr(backend, "image", DEFAULT_IMAGE), *allowed_images}
        self.admission = admission
        self.max_request_bytes = max_request_bytes
        self.max_pending = max_pending
        self.metrics = SandboxMetrics(backend)
        self.run_code = RunCodeService(backend, metrics=self.metrics)
        if quotas and sum(quotas.values()) + self.run_code.max_idle > backend.max_sandboxes:
            self.run_code.close()
            raise ValueError(
                f"the tenants' quotas ({sum(quotas.values())}) and the idle /run_code runners "
                f"({self.run_code.max_idle}) need more than max_sandboxes={backend.max_sandboxes}"
            )
        self.create_limiter = anyio.CapacityLimiter(max_creates)
        self.run_code_limiter = anyio.CapacityLimiter(max_run_code)
        self._starting: Counter[str] = Counter()  # per tenant: creates and /run_code calls under way
        # sandbox -> (its limiter, [calls running or waiting]); an entry goes with its sandbox
        self._lanes: weakref.WeakKeyDictionary[AgentSandbox, tuple[anyio.CapacityLimiter, list[int]]] = (
            weakref.WeakKeyDictionary()
        )

    # -- who is calling, and on what ---------------------------------------------------------------
    def tenant_of(self, request: Request) -> str:
        """The caller's tenant, from a bearer token or the password of HTTP basic auth."""
        if not self.tenants:
            return "default"
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        given = value.strip() if scheme.lower() == "bearer" else None
        if scheme.lower() == "basic":
            try:
                given = base64.b64decode(value.strip(), validate=True).decode().partition(":")[2]
            except (binascii.Error, ValueError):
                given = None
        for known, tenant in self.tenants.items():
            if given is not None and hmac.compare_digest(given.encode(), known.encode()):
                return tenant
        raise HTTPException(401, "missing or wrong token", headers={"WWW-Authenticate": "Bearer"})

    def owned(self, sandbox_id: str, tenant: str, *, alive: bool = True) -> AgentSandbox:
        """The tenant's sandbox (another tenant's is as absent as a missing one); 410 if it is dead."""
        sandbox = self.backend.get(sandbox_id)
        if sandbox.owner != tenant:
            raise SandboxNotFound(f"sandbox {sandbox_id}: no such sandbox")
        if alive and sandbox.dead:
            raise SandboxDead(f"sandbox {sandbox_id} is dead: {sandbox.dead}; DELETE it")
        return sandbox

    # -- a sandbox's own lane ------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def lane(self, sandbox: AgentSandbox, *, counted: bool = True) -> AsyncIterator[None]:
        """The sandbox's own lane: one call at a time, at most `max_pending` running or waiting
        (`counted=False`: the next chunk of a download under way, which waits but is never refused)."""
        limiter, pending = self._lanes.setdefault(sandbox, (anyio.CapacityLimiter(1), [0]))
        if counted and pending[0] >= self.max_pending:
            self.metrics.rejected.labels("busy").inc()
            raise Busy(
                f"sandbox {sandbox.sandbox_id} already has {self.max_pending} calls running or waiting"
            )
        pending[0] += 1
        try:
            async with limiter:
                yield
        finally:
            pending[0] -= 1

    async def on_sandbox(self, sandbox: AgentSandbox, fn: Callable[..., T], *args: Any) -> T:
        async with self.lane(sandbox):
            return await in_thread(fn, *args)

    # -- creates and /run_code -----------------------------------------------------------------------
    @contextlib.contextmanager
    def quota_slot(self, tenant: str, what: str) -> Iterator[None]:
        """Count a create or /run_code call against the tenant's quota while it is under way."""
        quota = self.quotas.get(tenant)
        if quota is not None:
            held = len(self.backend.list(owner=tenant)) + self._starting[tenant]
            if held >= quota:
                self.metrics.rejected.labels("quota").inc()
                raise QuotaExceeded(
                    f"tenant {tenant!r} holds {held} sandboxes and /run_code calls, its quota of {quota}; "
                    f"{what} later or close some"
                )
        self._starting[tenant] += 1
        try:
            yield
        finally:
            self._starting[tenant] -= 1

    async def admitted(
        self,
        request: Request,
        model: type[M],
        run: Callable[[M], BaseModel],
        *,
        limiter: anyio.CapacityLimiter,
        tenant: str,
        what: str,
    ) -> Response:
        """The one admission path of a call that may start a sandbox (create, /run_code): its limiter,
        the tenant's quota, a heavy slot for a big body, the body read as `model` once all are held;
        then `run` in a worker thread, answered as JSON. The heavy slot is held until the answer is sent."""
        async with limiter:
            with self.quota_slot(tenant, what):
                release = await self.admission.slot(big_body(request))
                try:
                    req = await self.admission.read(request, model)
                    result = await in_thread(run, req)
                    del req
                    return HeldResponse(result.model_dump_json(), release, "application/json")
                except BaseException:
                    release()
                    raise
