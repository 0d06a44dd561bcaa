"""The sandbox HTTP API (FastAPI): REST under /v1/sandboxes, SandboxFusion's /run_code, /metrics.

Blocking backend calls run in worker threads, but never from one shared pool: each sandbox's calls
go through its own limiter (one call at a time, as its agent is serial; the excess waits without a
thread and beyond `max_pending` is answered 429), creates and /run_code have limiters of their own,
and DELETE needs none, so no sandbox can starve another, or the server.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import tempfile
import weakref
from collections.abc import Callable, Iterable
from typing import Annotated, Any, TypeVar

import anyio
from fastapi import Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from agentrl.sandbox_server.backend import Backend
from agentrl.sandbox_server.errors import Busy, Forbidden, SandboxDead, SandboxError, SandboxNotFound
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


def create_app(
    backend: Backend,
    *,
    token: str | None = None,
    tokens: dict[str, str] | None = None,
    allowed_images: Iterable[str] = (),
    max_request_bytes: int = 64 << 20,
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
    """
    tenants = dict(tokens or {})
    if token is not None:
        tenants[token] = "default"
    images = {getattr(backend, "image", DEFAULT_IMAGE), *allowed_images}
    app = FastAPI(title="agentrl sandbox server", version="2", responses=ERRORS)
    app.state.backend = backend
    metrics = app.state.metrics = Metrics(backend)
    run_code_service = app.state.run_code = RunCodeService(backend, metrics=metrics)
    app.router.on_shutdown.append(run_code_service.close)
    app.add_middleware(BodyLimit, max_bytes=max_request_bytes)
    create_limiter = anyio.CapacityLimiter(max_creates)
    run_code_limiter = anyio.CapacityLimiter(max_run_code)
    # sandbox -> (its limiter, [calls running or waiting]); an entry goes with its sandbox
    lanes: weakref.WeakKeyDictionary[AgentSandbox, tuple[anyio.CapacityLimiter, list[int]]] = (
        weakref.WeakKeyDictionary()
    )

    async def in_thread(limiter: anyio.CapacityLimiter | None, fn: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(lambda: fn(*args), limiter=limiter or anyio.CapacityLimiter(1))

    async def on_sandbox(sandbox: AgentSandbox, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn` in the sandbox's own lane: one at a time, at most `max_pending` running or waiting."""
        limiter, pending = lanes.setdefault(sandbox, (anyio.CapacityLimiter(1), [0]))
        if pending[0] >= max_pending:
            metrics.rejected.labels("busy").inc()
            raise Busy(f"sandbox {sandbox.sandbox_id} already has {max_pending} calls running or waiting")
        pending[0] += 1
        try:
            return await in_thread(limiter, fn, *args)
        finally:
            pending[0] -= 1

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
    async def health() -> dict[str, str]:
        return {"status": "healthy"}

    @app.get("/metrics", response_class=PlainTextResponse)
    async def prometheus(tenant: str = Tenant) -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    @app.post("/v1/sandboxes", response_model=SandboxInfo)
    async def create_sandbox(req: CreateSandboxRequest, tenant: str = Tenant) -> SandboxInfo:
        if (req.image or DEFAULT_IMAGE) not in images:
            raise Forbidden(f"image {req.image!r} is not on this server's allow-list: {sorted(images)}")
        files = {path: b64decode(data, f"files[{path!r}]") for path, data in req.files.items()}
        spec = SandboxSpec(**req.model_dump(exclude={"files"}))
        sandbox = await in_thread(
            create_limiter, lambda: backend.create(spec=spec, files=files, owner=tenant)
        )
        metrics.created.inc()
        return sandbox.info

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

    @app.post("/v1/sandboxes/{sandbox_id}/exec", response_model=ExecResult)
    async def exec_command(sandbox_id: str, req: ExecRequest, tenant: str = Tenant) -> ExecResult:
        sandbox = owned(sandbox_id, tenant)
        common = {"timeout_s": req.timeout_s, "stdin": req.stdin, "max_output_bytes": req.max_output_bytes}
        if req.code is not None:
            result = await on_sandbox(sandbox, lambda: sandbox.run_code(req.code, req.language, **common))
        else:
            result = await on_sandbox(
                sandbox,
                lambda: sandbox.exec(
                    req.command,
                    idle_timeout_s=req.idle_timeout_s,
                    mode=req.mode,
                    keep_alive=req.keep_alive,
                    **common,
                ),
            )
        metrics.execs.labels(result.status).inc()
        metrics.exec_seconds.observe(result.duration_ms / 1000.0)
        return result

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
        with tempfile.SpooledTemporaryFile(CHUNK) as body:  # streamed: memory stays flat
            async for chunk in request.stream():
                body.write(chunk)
            body.seek(0)
            if archive:
                await on_sandbox(sandbox, sandbox.put_archive_stream, path, body)
            else:
                await on_sandbox(sandbox, sandbox.write_stream, path, body, mode)
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
        if archive:
            data = await on_sandbox(sandbox, sandbox.get_archive, path, max_request_bytes)
            return Response(data, media_type="application/x-tar")
        data = await on_sandbox(sandbox, sandbox.read_file, path, max_request_bytes)
        return Response(data, media_type="application/octet-stream")

    @app.post("/run_code", response_model=RunCodeResponse)
    async def run_code(req: RunCodeRequest, tenant: str = Tenant) -> RunCodeResponse:
        return await in_thread(run_code_limiter, run_code_service.run, req)

    return app
