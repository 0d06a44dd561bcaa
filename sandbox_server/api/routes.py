"""The sandbox server's routes, as four small routers: sessions, commands, files and health.

Each route finds the server's shared state (`ServerState`) on the app and the caller's tenant by
dependency; creates and /run_code share one admission path (`ServerState.admitted`), and every call
on a sandbox runs in that sandbox's own lane.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any, TypeVar

import anyio
from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import PlainTextResponse, StreamingResponse
from pydantic import BaseModel

from agentrl.sandbox_server.api.admission import LIGHT_BYTES, HeldResponse
from agentrl.sandbox_server.api.run_code import b64decode
from agentrl.sandbox_server.api.server_state import ServerState, big_body, in_thread
from agentrl.sandbox_server.sandboxes.sandbox import CHUNK, AgentSandbox
from agentrl.sandbox_server.wire.errors import Forbidden, SandboxError
from agentrl.sandbox_server.wire.models import (
    DEFAULT_IMAGE,
    PATH_PATTERN,
    CreateSandboxRequest,
    ExecRequest,
    ExecResult,
    RelayRequest,
    RelayResult,
    RunCodeRequest,
    RunCodeResponse,
    SandboxInfo,
    SandboxSpec,
)
from agentrl.sandbox_server.wire.paths import MAX_PATH_BYTES

Body = TypeVar("Body", ExecRequest, RelayRequest)
# the pattern is the schema's word for what `paths.check_path` refuses, with its own clear message
FilePath = Annotated[
    str,
    Query(min_length=1, max_length=MAX_PATH_BYTES, description="relative to /workspace",
          json_schema_extra={"pattern": PATH_PATTERN}),
]


async def server_state(request: Request) -> ServerState:
    return request.app.state.server


async def tenant_of(request: Request) -> str:
    """The caller's tenant. Async although it never waits: FastAPI runs a plain `def`
    dependency in a worker thread, a thread hop on every request."""
    return request.app.state.server.tenant_of(request)


State = Annotated[ServerState, Depends(server_state)]
Tenant = Annotated[str, Depends(tenant_of)]


def json_body(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI request body of an endpoint that reads its body itself (once it has its turn), and
    the 422 it answers when the body is not one (`Admission.read`, as FastAPI would answer it)."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    invalid = {"application/json": {"schema": {"$ref": "#/components/schemas/HTTPValidationError"}}}
    return {
        "requestBody": {"required": True, "content": {"application/json": {"schema": schema}}},
        "responses": {"422": {"description": "Validation Error", "content": invalid}},
    }


# the body of an upload, streamed: any bytes (a tar archive with `archive=true`)
BYTES = {"schema": {"type": "string", "format": "binary"}}
UPLOAD_BODY = {"requestBody": {"content": {"application/octet-stream": BYTES}}}


# -- sessions: create, list, get, delete ---------------------------------------------------------------
sessions = APIRouter(prefix="/v1/sandboxes", tags=["sessions"])


@sessions.post("", response_model=SandboxInfo, openapi_extra=json_body(CreateSandboxRequest))
async def create_sandbox(request: Request, server: State, tenant: Tenant) -> Response:
    """Body: `CreateSandboxRequest`, read once the call has its turn."""

    def create(req: CreateSandboxRequest) -> SandboxInfo:
        if (req.image or DEFAULT_IMAGE) not in server.images:
            raise Forbidden(
                f"image {req.image!r} is not on this server's allow-list: {sorted(server.images)}"
            )
        files = {path: b64decode(data, f"files[{path!r}]") for path, data in req.files.items()}
        spec = SandboxSpec(**req.model_dump(exclude={"files"}))
        sandbox = server.backend.create(spec=spec, files=files, owner=tenant)
        server.metrics.created.inc()
        return sandbox.info

    limiter = server.create_limiter
    return await server.admitted(
        request, CreateSandboxRequest, create, limiter=limiter, tenant=tenant, what="create"
    )


@sessions.get("", response_model=list[SandboxInfo])
async def list_sandboxes(server: State, tenant: Tenant) -> list[SandboxInfo]:
    return server.backend.list(owner=tenant)


@sessions.get("/{sandbox_id}", response_model=SandboxInfo)
async def get_sandbox(sandbox_id: str, server: State, tenant: Tenant) -> SandboxInfo:
    return server.owned(sandbox_id, tenant).info


@sessions.delete("/{sandbox_id}", status_code=204)
async def delete_sandbox(sandbox_id: str, server: State, tenant: Tenant) -> Response:
    server.owned(sandbox_id, tenant, alive=False)
    await in_thread(server.backend.destroy, sandbox_id)
    return Response(status_code=204)


# -- commands: exec, reset, SandboxFusion's /run_code --------------------------------------------------
commands = APIRouter(tags=["commands"])


@commands.post(
    "/v1/sandboxes/{sandbox_id}/exec", response_model=ExecResult, openapi_extra=json_body(ExecRequest)
)
async def exec_command(sandbox_id: str, request: Request) -> Response:
    """Body: `ExecRequest` (a command or code, and `ExecOptions`), read once the call has its turn;
    answered as JSON of `ExecResult`."""
    return await on_lane(request, sandbox_id, ExecRequest, run_exec)


async def on_lane(
    request: Request,
    sandbox_id: str,
    model: type[Body],
    run: Callable[[ServerState, AgentSandbox, Body], Awaitable[BaseModel]],
) -> Response:
    """A call that reads a JSON body and answers JSON, in the sandbox's lane: the body is read once
    the call has its turn, and a call that carries or may answer more than a light one holds a
    heavy slot until its answer is sent (`Admission`)."""
    # the hot path: the server and the tenant are found here, not as dependencies, whose resolution
    # cost FastAPI about 30 microseconds per exec, more than the lookups themselves
    server: ServerState = request.app.state.server
    sandbox = server.owned(sandbox_id, server.tenant_of(request))
    admission = server.admission
    async with server.lane(sandbox):
        heavy = big_body(request)
        release = await admission.slot(heavy)
        try:
            req = await admission.read(request, model)
            admission.check_output(req.max_output_bytes)
            if not heavy and req.max_output_bytes > LIGHT_BYTES // 2:
                release = await admission.slot(True)
            result = await run(server, sandbox, req)
            del req
            return HeldResponse(result.model_dump_json(), release, "application/json")
        except BaseException:
            release()
            raise


async def run_exec(server: ServerState, sandbox: AgentSandbox, req: ExecRequest) -> ExecResult:
    """The request's command or code, with its options handed on as they came; the agent is waited
    for on the event loop, not in a worker thread (`AgentLink.acall`)."""
    if req.code is not None:
        result = await sandbox.arun_code(req.code, req.language, req.options())
    else:
        assert req.command is not None  # ExecRequest holds exactly one of them
        result = await sandbox.aexec(req.command, req.options())
    server.metrics.execs.labels(result.status).inc()
    server.metrics.exec_seconds.observe(result.duration_ms / 1000.0)
    return result


@commands.post(
    "/v1/sandboxes/{sandbox_id}/relay", response_model=RelayResult, openapi_extra=json_body(RelayRequest)
)
async def relay(sandbox_id: str, request: Request) -> Response:
    """Body: `RelayRequest` (text for a port on the sandbox's own loopback, and `RelayOptions`);
    answered as JSON of `RelayResult`. No command runs: the sandbox's agent connects, sends the
    text and reads the answer until the port closes the connection."""
    return await on_lane(request, sandbox_id, RelayRequest, run_relay)


async def run_relay(server: ServerState, sandbox: AgentSandbox, req: RelayRequest) -> RelayResult:
    return await sandbox.arelay(req.port, req.data, req.options())


@commands.post("/v1/sandboxes/{sandbox_id}/reset_processes", status_code=204)
async def reset_processes(sandbox_id: str, server: State, tenant: Tenant) -> Response:
    sandbox = server.owned(sandbox_id, tenant)
    await server.on_sandbox(sandbox, sandbox.reset_processes)
    return Response(status_code=204)


@commands.post("/run_code", response_model=RunCodeResponse, openapi_extra=json_body(RunCodeRequest))
async def run_code(request: Request, server: State, tenant: Tenant) -> Response:
    """Body: SandboxFusion's `RunCodeRequest`, read once the call has its turn."""
    return await server.admitted(
        request,
        RunCodeRequest,
        server.run_code.run,
        limiter=server.run_code_limiter,
        tenant=tenant,
        what="call /run_code",
    )


# -- files: upload and download, streamed ----------------------------------------------------------------
files = APIRouter(prefix="/v1/sandboxes/{sandbox_id}/files", tags=["files"])


@files.put("", status_code=204, openapi_extra=UPLOAD_BODY)
async def put_file(
    sandbox_id: str,
    path: FilePath,
    request: Request,
    server: State,
    tenant: Tenant,
    archive: bool = False,
    mode: Annotated[int, Query(ge=0, le=0o7777)] = 0o644,
) -> Response:
    sandbox = server.owned(sandbox_id, tenant)
    async with server.lane(sandbox):  # the body is read once the call has its turn
        with tempfile.SpooledTemporaryFile(CHUNK) as body:  # streamed: memory stays flat
            async for chunk in request.stream():
                body.write(chunk)
            body.seek(0)
            if archive:
                await in_thread(sandbox.put_archive_stream, path, body)
            else:
                await in_thread(sandbox.write_stream, path, body, mode)
    return Response(status_code=204)


@files.get(
    "",
    response_class=Response,
    responses={200: {"content": {"application/octet-stream": {}, "application/x-tar": {}}}},
)
async def get_file(
    sandbox_id: str, path: FilePath, server: State, tenant: Tenant, archive: bool = False
) -> Response:
    sandbox = server.owned(sandbox_id, tenant)
    media_type = "application/x-tar" if archive else "application/octet-stream"
    async with server.lane(sandbox):
        size, name, data = await in_thread(
            lambda: sandbox.stage_download(path, archive=archive, max_bytes=server.max_request_bytes)
        )
    if name is None:
        return Response(data, media_type=media_type)

    async def chunks() -> AsyncIterator[bytes]:
        """The download a chunk at a time, each fetched in the sandbox's lane as the client reads."""
        try:
            for offset in range(0, size, CHUNK):
                async with server.lane(sandbox, counted=False):
                    chunk = await in_thread(sandbox.fetch_chunk, name, offset)
                yield chunk  # sent with the lane free: a slow reader holds up no other call
        finally:
            with anyio.CancelScope(shield=True), contextlib.suppress(SandboxError):
                async with server.lane(sandbox, counted=False):
                    await in_thread(sandbox.drop_download, name)

    return StreamingResponse(chunks(), media_type=media_type, headers={"content-length": str(size)})


# -- health: liveness and metrics ------------------------------------------------------------------------
health = APIRouter(tags=["health"])


@health.get("/v1/ping", response_class=PlainTextResponse)
async def ping() -> str:
    return "pong"


@health.get("/health")
async def healthy(server: State) -> dict[str, Any]:
    """`live_sandboxes`: what a cluster of sandbox servers balances new sandboxes by."""
    return {"status": "healthy", "live_sandboxes": len(server.backend.list())}


@health.get("/metrics", response_class=PlainTextResponse)
async def prometheus(server: State, tenant: Tenant) -> Response:
    return Response(server.metrics.render(), media_type=server.metrics.content_type)
