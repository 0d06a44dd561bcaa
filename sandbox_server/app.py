"""The sandbox HTTP API (FastAPI): REST under /v1/sandboxes plus SandboxFusion's /run_code."""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import anyio
from fastapi import Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import ValidationError

from agentrl.sandbox_server.backend import Backend
from agentrl.sandbox_server.errors import SandboxError
from agentrl.sandbox_server.models import (
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

T = TypeVar("T")
FilePath = Annotated[str, Query(min_length=1, max_length=4096, description="relative to /workspace")]
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 404, 413, 503)
}


class BodyLimit:
    """ASGI middleware: refuse request bodies over `max_bytes` (413) before they are read into memory."""

    def __init__(self, app: Any, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        seen = 0

        async def limited_receive() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                raise _TooLarge
            return message

        try:
            await self.app(scope, limited_receive, send)
        except _TooLarge:
            await self._refuse(send)

    async def _refuse(self, send: Callable) -> None:
        response = JSONResponse(
            {"detail": f"request body over the limit of {self.max_bytes} bytes", "kind": "too_large"}, 413
        )
        await response({"type": "http"}, None, send)


class _TooLarge(Exception):
    pass


def create_app(
    backend: Backend, *, token: str | None = None, max_request_bytes: int = 64 << 20, max_threads: int = 512
) -> FastAPI:
    """The API over `backend`. With `token`, every route but /v1/ping and /health needs it, as
    `Authorization: Bearer <token>` or as the password of HTTP basic auth (so clients that only take
    a URL, like SandboxFusion's, can pass `http://user:<token>@host:port`)."""
    app = FastAPI(title="agentrl sandbox server", version="1", responses=ERRORS)
    app.state.backend = backend
    run_code_service = app.state.run_code = RunCodeService(backend)
    app.router.on_shutdown.append(run_code_service.close)
    app.add_middleware(BodyLimit, max_bytes=max_request_bytes)
    limiter = anyio.CapacityLimiter(max_threads)  # backend calls block: run them in threads

    async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs), limiter=limiter)

    async def authorize(request: Request) -> None:
        if token is None:
            return
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        given = value.strip() if scheme.lower() == "bearer" else None
        if scheme.lower() == "basic":
            try:
                given = base64.b64decode(value.strip(), validate=True).decode().partition(":")[2]
            except (binascii.Error, ValueError):
                given = None
        if given is None or not hmac.compare_digest(given.encode(), token.encode()):
            raise HTTPException(401, "missing or wrong token", headers={"WWW-Authenticate": "Bearer"})

    Auth = Depends(authorize)

    @app.exception_handler(SandboxError)
    async def _sandbox_error(request: Request, exc: SandboxError) -> JSONResponse:
        return JSONResponse({"detail": str(exc), "kind": exc.kind}, exc.http_status)

    @app.exception_handler(ValidationError)
    async def _invalid(request: Request, exc: ValidationError) -> JSONResponse:
        return JSONResponse({"detail": str(exc), "kind": "invalid"}, 400)

    @app.exception_handler(FileNotFoundError)
    async def _not_found(request: Request, exc: FileNotFoundError) -> JSONResponse:
        return JSONResponse({"detail": str(exc), "kind": "file_not_found"}, 404)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        kind = {401: "unauthorized", 404: "not_found"}.get(exc.status_code, "http_error")
        return JSONResponse({"detail": str(exc.detail), "kind": kind}, exc.status_code, headers=exc.headers)

    @app.get("/v1/ping", response_class=PlainTextResponse)
    async def ping() -> str:
        return "pong"

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "healthy"}

    @app.post("/v1/sandboxes", response_model=SandboxInfo, dependencies=[Auth])
    async def create_sandbox(req: CreateSandboxRequest) -> SandboxInfo:
        files = {path: b64decode(data, f"files[{path!r}]") for path, data in req.files.items()}
        spec = SandboxSpec(**req.model_dump(exclude={"files"}))
        sandbox = await run(backend.create, spec=spec, files=files)
        return sandbox.info

    @app.get("/v1/sandboxes", response_model=list[SandboxInfo], dependencies=[Auth])
    async def list_sandboxes() -> list[SandboxInfo]:
        return backend.list()

    @app.get("/v1/sandboxes/{sandbox_id}", response_model=SandboxInfo, dependencies=[Auth])
    async def get_sandbox(sandbox_id: str) -> SandboxInfo:
        return backend.get(sandbox_id).info

    @app.delete("/v1/sandboxes/{sandbox_id}", status_code=204, dependencies=[Auth])
    async def delete_sandbox(sandbox_id: str) -> Response:
        backend.get(sandbox_id)
        await run(backend.destroy, sandbox_id)
        return Response(status_code=204)

    @app.post("/v1/sandboxes/{sandbox_id}/exec", response_model=ExecResult, dependencies=[Auth])
    async def exec_command(sandbox_id: str, req: ExecRequest) -> ExecResult:
        sandbox = backend.get(sandbox_id)
        common = {"timeout_s": req.timeout_s, "stdin": req.stdin, "max_output_bytes": req.max_output_bytes}
        if req.code is not None:
            return await run(sandbox.run_code, req.code, req.language, **common)
        return await run(
            sandbox.exec, req.command, idle_timeout_s=req.idle_timeout_s, mode=req.mode, **common
        )

    @app.put("/v1/sandboxes/{sandbox_id}/files", status_code=204, dependencies=[Auth])
    async def put_file(
        sandbox_id: str,
        path: FilePath,
        request: Request,
        archive: bool = False,
        mode: Annotated[int, Query(ge=0, le=0o7777)] = 0o644,
    ) -> Response:
        sandbox = backend.get(sandbox_id)
        body = await request.body()
        if archive:
            await run(sandbox.put_archive, path, body)
        else:
            await run(sandbox.write_file, path, body, mode)
        return Response(status_code=204)

    @app.get(
        "/v1/sandboxes/{sandbox_id}/files",
        response_class=Response,
        dependencies=[Auth],
        responses={200: {"content": {"application/octet-stream": {}, "application/x-tar": {}}}},
    )
    async def get_file(sandbox_id: str, path: FilePath, archive: bool = False) -> Response:
        sandbox = backend.get(sandbox_id)
        if archive:
            return Response(
                await run(sandbox.get_archive, path, max_request_bytes), media_type="application/x-tar"
            )
        return Response(
            await run(sandbox.read_file, path, max_request_bytes), media_type="application/octet-stream"
        )

    @app.post("/run_code", response_model=RunCodeResponse, dependencies=[Auth])
    async def run_code(req: RunCodeRequest) -> RunCodeResponse:
        return await run(run_code_service.run, req)

    return app
