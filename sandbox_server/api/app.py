"""The sandbox HTTP API (FastAPI): REST under /v1/sandboxes, SandboxFusion's /run_code, /metrics.

`create_app` builds the server's shared state (`ServerState`: tenants, quotas, lanes, admission) and
mounts the routers of routes.py (sessions, commands, files, health) and the error handlers, which
answer every `SandboxError` with its status and `kind`, on the skeleton every agentrl server shares
(`agentrl.serving.apps.server_app`). Downloads stream a chunk at a time.
"""

from __future__ import annotations

import errno
from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect

from agentrl.sandbox_server.api import routes
from agentrl.sandbox_server.api.admission import Admission
from agentrl.sandbox_server.api.limits import BodyLimit
from agentrl.sandbox_server.api.metrics import SandboxMetrics
from agentrl.sandbox_server.api.server_state import ServerState
from agentrl.sandbox_server.sandboxes.backend import Backend
from agentrl.sandbox_server.wire.errors import DiskFull, SandboxError
from agentrl.sandbox_server.wire.models import ErrorResponse
from agentrl.serving.apps import ErrorHandler, server_app
from agentrl.serving.openapi import allowed_methods

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 403, 404, 410, 413, 429, 502, 503, 507)
}


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
    admission = Admission(
        max_json_bytes=max_json_bytes, max_output_bytes=max_output_bytes, heavy_calls=heavy_calls
    )
    server = ServerState(
        backend,
        tenants=tenants,
        allowed_images=allowed_images,
        quotas=dict(quotas or {}),
        admission=admission,
        max_request_bytes=max_request_bytes,
        max_pending=max_pending,
        max_creates=max_creates,
        max_run_code=max_run_code,
    )
    app = server_app(
        "agentrl sandbox server",
        version="2",
        responses=ERRORS,
        state={"server": server, "backend": backend, "metrics": server.metrics, "run_code": server.run_code},
        routers=[routes.sessions, routes.commands, routes.files, routes.health],
        errors=_error_handlers(server.metrics),
        middleware=[Middleware(BodyLimit, max_bytes=max_request_bytes)],
    )
    app.router.on_shutdown.append(server.run_code.close)
    return app


def _error_handlers(metrics: SandboxMetrics) -> dict[type[Exception], ErrorHandler]:
    """Every error as `{"detail", "kind"}` with its status, counted by kind: a `SandboxError`'s own,
    a missing file, the server's own full disk, FastAPI's and the router's, a caller gone, a bug."""

    async def _sandbox_error(request: Request, exc: SandboxError) -> JSONResponse:
        metrics.errors.labels(exc.kind).inc()
        return JSONResponse({"detail": str(exc), "kind": exc.kind}, exc.http_status)

    async def _not_found(request: Request, exc: FileNotFoundError) -> JSONResponse:
        return JSONResponse({"detail": str(exc), "kind": "file_not_found"}, 404)

    async def _host_disk_full(request: Request, exc: OSError) -> JSONResponse:
        """The server's own disk full (its temporary directory, where uploads are spooled): the
        caller's `disk_full`, as a sandbox's own full disk is; any other OSError stays unexpected
        (a FileNotFoundError keeps its own handler, the more specific)."""
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise exc
        metrics.errors.labels(DiskFull.kind).inc()
        return JSONResponse({"detail": f"no space left on the sandbox server's own disk (its temporary "
                             f"directory, where uploads are spooled): {exc}", "kind": DiskFull.kind},
                            DiskFull.http_status)

    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """FastAPI's own and the router's (404, 405)."""
        kind = {401: "unauthorized", 404: "not_found"}.get(exc.status_code, "http_error")
        headers = exc.headers
        if exc.status_code == 405:  # every method of the path, not only the route Starlette tried
            headers = {**(headers or {}), "Allow": allowed_methods(request.app.router.routes, request.scope)}
        return JSONResponse({"detail": str(exc.detail), "kind": kind}, exc.status_code, headers=headers)

    async def _client_gone(request: Request, exc: ClientDisconnect) -> Response:
        """The caller hung up before its body was read (it may have waited its turn for a while): no
        one is left to answer, and nothing went wrong here; counted, not logged as a crash."""
        metrics.errors.labels("client_disconnected").inc()
        return Response(status_code=499)

    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        metrics.errors.labels("internal").inc()
        return JSONResponse({"detail": f"{type(exc).__name__}: {exc}", "kind": "internal"}, 500)

    return {SandboxError: _sandbox_error, FileNotFoundError: _not_found, OSError: _host_disk_full,
            StarletteHTTPException: _http_error, ClientDisconnect: _client_gone, Exception: _unexpected}
