"""The sandbox HTTP API (FastAPI): REST under /v1/sandboxes, SandboxFusion's /run_code, /metrics.

Blocking backend calls run in worker threads, but never from one shared pool: each sandbox's calls
go through its own limiter (one call at a time, as its agent is serial; the excess waits without a
thread and beyond `max_pending` is answered 429), creates and /run_code have limiters of their own,
and DELETE needs none, so no sandbox can starve another, or the server. A call reads its body only
once it has its turn, and big ones take a heavy slot (admission.py): memory is bounded by the
operator's settings, not by what requests carry. Downloads stream a chunk at a time.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hmac
import tempfile
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Annotated, Any, TypeVar

import anyio
from fastapi import Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from pydantic import BaseModel

from agentrl.sandbox_server.admission import LIGHT_BYTES, Admission, HeldResponse, declared_length
from agentrl.sandbox_server.backend import Backend
from agentrl.sandbox_server.errors import (
    Busy,
    Forbidden,
    QuotaExceeded,
    SandboxDead,
    SandboxError,
    SandboxNotFound,
)
from agentrl.sandbox_server.limits import BodyLimit
from agentrl.sandbox_server.metrics import Metrics
from agentrl.sandbox_server.models import (
    DEFAULT_IMAGE,
    CreateSandboxRequest,
    ErrorResponse,
    ExecRequest,
    ExecResult,
    RunCodeRequest,
    RunCodeResponse,
    SandboxInfo,
    SandboxSpec,
)
from agentrl.sandbox_server.run_code import RunCodeService, b64decode
from agentrl.sandbox_server.sandbox import CHUNK, AgentSandbox

T = TypeVar("T")
FilePath = Annotated[str, Query(min_length=1, max_length=4096, description="relative to /workspace")]
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 403, 404, 410, 413, 429, 502, 503)
}


def json_body(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI request body of an endpoint that reads its body itself (once it has its turn)."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def create_app(
    backend: Backend,
    *,
    token: str | None = None,
    tokens: dict[str, str] | None = None,
    allowed_images: Iterable[str] = (),
    max_request_bytes: int = 64 << 20,
    max_json_bytes: int = 16 << 20,
    max_output_bytes: int = 16 << 20,
    heavy_calls: int = 4,
    quotas: dict[str, int] | None = None,
    max_pending: int = 8,
    max_creates: int = 32,
    max_run_code: int = 64,
) -> FastAPI:
    """The API over `backend`.

    Tenants: `tokens` maps each bearer token to a tenant name (`token` alone is one tenant); a
    tenant sees and touches only its own sandboxes. With no token the server is open (one tenant).
    Tokens also work as the password of HTTP basic auth, for clients that only take a URL (like
    SandboxFusion's: `http://user:<token>@host:port`). Only the backend's default image and
    `allowed_images` may be asked for.

    Memory: uploads (PUT .../files) up to `max_request_bytes`, streamed to disk; JSON requests up to
    `max_json_bytes`; exec output up to `max_output_bytes` per stream; at most `heavy_calls` calls
    carrying or asking for more than a MiB at once. Quotas: `quotas` maps a tenant to the most
    sandboxes it may hold, its /run_code calls under way included (over: 429); a tenant without one
    is bounded by the backend's `max_sandboxes` alone.
    """
    tenants = dict(tokens or {})
    if token is not None:
        tenants[token] = "default"
    quotas = dict(quotas or {})
    images = {getattr(backend, "image", DEFAULT_IMAGE), *allowed_images}
    app = FastAPI(title="agentrl sandbox server", version="2", responses=ERRORS)
    app.state.backend = backend
    metrics = app.state.metrics = Metrics(backend)
    run_code_service = app.state.run_code = RunCodeService(backend, metrics=metrics)
    app.router.on_shutdown.append(run_code_service.close)
    app.add_middleware(BodyLimit, max_bytes=max_request_bytes)
    if quotas and sum(quotas.values()) + run_code_service.max_idle > backend.max_sandboxes:
        raise ValueError(
            f"the tenants' quotas ({sum(quotas.values())}) and the idle /run_code runners "
            f"({run_code_service.max_idle}) need more than max_sandboxes={backend.max_sandboxes}"
        )
    admission = Admission(
        max_json_bytes=max_json_bytes, max_output_bytes=max_output_bytes, heavy_calls=heavy_calls
    )
    starting: Counter[str] = Counter()  # per tenant: creates and /run_code calls under way
    create_limiter = anyio.CapacityLimiter(max_creates)
    run_code_limiter = anyio.CapacityLimiter(max_run_code)
    # sandbox -> (its limiter, [calls running or waiting]); an entry goes with its sandbox
    lanes: weakref.WeakKeyDictionary[AgentSandbox, tuple[anyio.CapacityLimiter, list[int]]] = (
        weakref.WeakKeyDictionary()
    )

    async def in_thread(limiter: anyio.CapacityLimiter | None, fn: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(lambda: fn(*args), limiter=limiter or anyio.CapacityLimiter(1))

    @contextlib.asynccontextmanager
    async def lane(sandbox: AgentSandbox, *, counted: bool = True) -> AsyncIterator[None]:
        """The sandbox's own lane: one call at a time, at most `max_pending` running or waiting
        (`counted=False`: the next chunk of a download under way, which waits but is never refused)."""
        limiter, pending = lanes.setdefault(sandbox, (anyio.CapacityLimiter(1), [0]))
        if counted and pending[0] >= max_pending:
            metrics.rejected.labels("busy").inc()
            raise Busy(f"sandbox {sandbox.sandbox_id} already has {max_pending} calls running or waiting")
        pending[0] += 1
        try:
            async with limiter:
                yield
        finally:
            pending[0] -= 1

    async def on_sandbox(sandbox: AgentSandbox, fn: Callable[..., T], *args: Any) -> T:
        async with lane(sandbox):
            return await in_thread(None, fn, *args)

    @contextlib.contextmanager
    def quota_slot(tenant: str, what: str) -> Any:
        """Count a create or /run_code call against the tenant's quota while it is under way."""
        quota = quotas.get(tenant)
        if quota is not None:
            held = len(backend.list(owner=tenant)) + starting[tenant]
            if held >= quota:
                metrics.rejected.labels("quota").inc()
                raise QuotaExceeded(
                    f"tenant {tenant!r} holds {held} sandboxes and /run_code calls, its quota of {quota}; "
                    f"{what} later or close some"
                )
        starting[tenant] += 1
        try:
            yield
        finally:
            starting[tenant] -= 1

    async def tenant_of(request: Request) -> str:
        """The caller's tenant. Async although it never waits: FastAPI runs a plain `def`
        dependency in a worker thread, a thread hop on every request."""
        if not tenants:
            return "default"
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        given = value.strip() if scheme.lower() == "bearer" else None
        if scheme.lower() == "basic":
            try:
                given = base64.b64decode(value.strip(), validate=True).decode().partition(":")[2]
            except (binascii.Error, ValueError):
                given = None
        for known, tenant in tenants.items():
            if given is not None and hmac.compare_digest(given.encode(), known.encode()):
                return tenant
        raise HTTPException(401, "missing or wrong token", headers={"WWW-Authenticate": "Bearer"})

    Tenant = Depends(tenant_of)

    def owned(sandbox_id: str, tenant: str, *, alive: bool = True) -> AgentSandbox:
        """The tenant's sandbox (another tenant's is as absent as a missing one); 410 if it is dead."""
        sandbox = backend.get(sandbox_id)
        if sandbox.owner != tenant:
            raise SandboxNotFound(f"sandbox {sandbox_id}: no such sandbox")
        if alive and sandbox.dead:
            raise SandboxDead(f"sandbox {sandbox_id} is dead: {sandbox.dead}; DELETE it")
        return sandbox

    @app.exception_handler(SandboxError)
    async def _sandbox_error(request: Request, exc: SandboxError) -> JSONResponse:
        metrics.errors.labels(exc.kind).inc()
        return JSONResponse({"detail": str(exc), "kind": exc.kind}, exc.http_status)

    @app.exception_handler(FileNotFoundError)
    async def _not_found(request: Request, exc: FileNotFoundError) -> JSONResponse:
        return JSONResponse({"detail": str(exc), "kind": "file_not_found"}, 404)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        kind = {401: "unauthorized", 404: "not_found"}.get(exc.status_code, "http_error")
        return JSONResponse({"detail": str(exc.detail), "kind": kind}, exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        metrics.errors.labels("internal").inc()
        return JSONResponse({"detail": f"{type(exc).__name__}: {exc}", "kind": "internal"}, 500)

    @app.get("/v1/ping", response_class=PlainTextResponse)
    async def ping() -> str:
        return "pong"

    @app.get("/health")
    async def health() -> dict[str, Any]:
        """`live_sandboxes`: what a cluster of sandbox servers balances new sandboxes by."""
        return {"status": "healthy", "live_sandboxes": len(backend.list())}

    @app.get("/metrics", response_class=PlainTextResponse)
    async def prometheus(tenant: str = Tenant) -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    @app.post("/v1/sandboxes", response_model=SandboxInfo, openapi_extra=json_body(CreateSandboxRequest))
    async def create_sandbox(request: Request, tenant: str = Tenant) -> SandboxInfo:
        async with create_limiter:
            with quota_slot(tenant, "create"):
                release = await admission.slot(big_body(request))
                try:
                    req = await admission.read(request, CreateSandboxRequest)
                    if (req.image or DEFAULT_IMAGE) not in images:
                        raise Forbidden(
                            f"image {req.image!r} is not on this server's allow-list: {sorted(images)}"
                        )
                    files = {path: b64decode(data, f"files[{path!r}]") for path, data in req.files.items()}
                    spec = SandboxSpec(**req.model_dump(exclude={"files"}))
                    del req
                    sandbox = await in_thread(
                        None, lambda: backend.create(spec=spec, files=files, owner=tenant)
                    )
                finally:
                    release()
        metrics.created.inc()
        return sandbox.info

    def big_body(request: Request) -> bool:
        declared = declared_length(request)
        return declared is None or declared > LIGHT_BYTES

    @app.get("/v1/sandboxes", response_model=list[SandboxInfo])
    async def list_sandboxes(tenant: str = Tenant) -> list[SandboxInfo]:
        return backend.list(owner=tenant)

    @app.get("/v1/sandboxes/{sandbox_id}", response_model=SandboxInfo)
    async def get_sandbox(sandbox_id: str, tenant: str = Tenant) -> SandboxInfo:
        return owned(sandbox_id, tenant).info

    @app.delete("/v1/sandboxes/{sandbox_id}", status_code=204)
    async def delete_sandbox(sandbox_id: str, tenant: str = Tenant) -> Response:
        owned(sandbox_id, tenant, alive=False)
        await in_thread(None, backend.destroy, sandbox_id)
        return Response(status_code=204)

    @app.post(
        "/v1/sandboxes/{sandbox_id}/exec", response_model=ExecResult, openapi_extra=json_body(ExecRequest)
    )
    async def exec_command(sandbox_id: str, request: Request, tenant: str = Tenant) -> Response:
        """Body: `ExecRequest`. Read once the call has its turn; answered as JSON of `ExecResult`."""
        sandbox = owned(sandbox_id, tenant)
        async with lane(sandbox):
            heavy = big_body(request)
            release = await admission.slot(heavy)
            try:
                req = await admission.read(request, ExecRequest)
                admission.check_output(req.max_output_bytes)
                if not heavy and req.max_output_bytes > LIGHT_BYTES // 2:
                    release = await admission.slot(True)
                result = await in_thread(None, run_exec, sandbox, req)
                del req
                metrics.execs.labels(result.status).inc()
                metrics.exec_seconds.observe(result.duration_ms / 1000.0)
                return HeldResponse(result.model_dump_json(), release, "application/json")
            except BaseException:
                release()
                raise

    def run_exec(sandbox: AgentSandbox, req: ExecRequest) -> ExecResult:
        common = {"timeout_s": req.timeout_s, "stdin": req.stdin, "max_output_bytes": req.max_output_bytes}
        if req.code is not None:
            return sandbox.run_code(req.code, req.language, **common)
        return sandbox.exec(
            req.command, idle_timeout_s=req.idle_timeout_s, mode=req.mode, keep_alive=req.keep_alive, **common
        )

    @app.post("/v1/sandboxes/{sandbox_id}/reset_processes", status_code=204)
    async def reset_processes(sandbox_id: str, tenant: str = Tenant) -> Response:
        sandbox = owned(sandbox_id, tenant)
        await on_sandbox(sandbox, sandbox.reset_processes)
        return Response(status_code=204)

    @app.put("/v1/sandboxes/{sandbox_id}/files", status_code=204)
    async def put_file(
        sandbox_id: str,
        path: FilePath,
        request: Request,
        archive: bool = False,
        mode: Annotated[int, Query(ge=0, le=0o7777)] = 0o644,
        tenant: str = Tenant,
    ) -> Response:
        sandbox = owned(sandbox_id, tenant)
        async with lane(sandbox):  # the body is read once the call has its turn
            with tempfile.SpooledTemporaryFile(CHUNK) as body:  # streamed: memory stays flat
                async for chunk in request.stream():
                    body.write(chunk)
                body.seek(0)
                if archive:
                    await in_thread(None, sandbox.put_archive_stream, path, body)
                else:
                    await in_thread(None, sandbox.write_stream, path, body, mode)
        return Response(status_code=204)

    @app.get(
        "/v1/sandboxes/{sandbox_id}/files",
        response_class=Response,
        responses={200: {"content": {"application/octet-stream": {}, "application/x-tar": {}}}},
    )
    async def get_file(
        sandbox_id: str, path: FilePath, archive: bool = False, tenant: str = Tenant
    ) -> Response:
        sandbox = owned(sandbox_id, tenant)
        media_type = "application/x-tar" if archive else "application/octet-stream"
        async with lane(sandbox):
            size, name, data = await in_thread(
                None, lambda: sandbox.stage_download(path, archive=archive, max_bytes=max_request_bytes)
            )
        if name is None:
            return Response(data, media_type=media_type)

        async def chunks() -> AsyncIterator[bytes]:
            """The download a chunk at a time, each fetched in the sandbox's lane as the client reads."""
            try:
                for offset in range(0, size, CHUNK):
                    async with lane(sandbox, counted=False):
                        chunk = await in_thread(None, sandbox.fetch_chunk, name, offset)
                    yield chunk  # sent with the lane free: a slow reader holds up no other call
            finally:
                with anyio.CancelScope(shield=True), contextlib.suppress(SandboxError):
                    async with lane(sandbox, counted=False):
                        await in_thread(None, sandbox.drop_download, name)

        return StreamingResponse(chunks(), media_type=media_type, headers={"content-length": str(size)})

    @app.post("/run_code", response_model=RunCodeResponse, openapi_extra=json_body(RunCodeRequest))
    async def run_code(request: Request, tenant: str = Tenant) -> Response:
        """Body: SandboxFusion's `RunCodeRequest`, read once the call has its turn."""
        async with run_code_limiter:
            with quota_slot(tenant, "call /run_code"):
                release = await admission.slot(big_body(request))
                try:
                    req = await admission.read(request, RunCodeRequest)
                    response = await in_thread(None, run_code_service.run, req)
                    del req
                    return HeldResponse(response.model_dump_json(), release, "application/json")
                except BaseException:
                    release()
                    raise

    return app
