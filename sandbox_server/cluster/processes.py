"""`agentrl sandbox serve --processes N`: N sandbox-server processes behind one address.

One sandbox server is one Python process: its event loop and JSON work run on one core, so execs/s
stop growing with sandboxes long before Docker does. Here each child runs the unchanged
`agentrl sandbox serve` on its own loopback port under its own holder name (`<name>-p<i>`), with a
Docker backend, warm pool and sandboxes of its own; sandbox ids carry the holder's name. The parent
serves the address a user is given: `GET /v1/cluster` (the holders, their URLs, states and open
sandboxes, read from each one's `/health` by the health watcher of `agentrl.serving.holders`),
`POST /v1/cluster/holders` (scale up), `POST /v1/cluster/holders/{name}/drain` (a server takes no
new sandboxes and stops once it holds none, or past a bound, when its clients replay what it held)
and `/health`; every other path answers 421 naming the map, since the sandbox traffic goes to the
holders directly (`agentrl.sandbox_server.clients.cluster.SandboxCluster` does that for a client).
Scale-up and drain are what `agentrl sandbox cluster roll` restarts every server with, one at a
time (`agentrl.serving.roll`, the env servers' roll too).

Why not uvicorn's `--workers`: its workers share one socket and the kernel hands each connection
to any of them, while a sandbox lives in the one process that made it; calls must reach their
holder, which only the client can do by the id. The supervision is the serving kit's
(`agentrl.serving.supervisor`, shared with `agentrl serve --processes`), which knows no env.

A child that exits is reported and started again on its port under its name (at most
`MAX_RESTARTS` times), without the sandboxes it held: a client replays them (`clients/cluster.py`). The
children die with the parent however it ends (`PR_SET_PDEATHSIG` on Linux); a parent that stops
normally terminates them first, and each closes its containers.
"""

from __future__ import annotations

import hmac
import logging
import sys
from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from agentrl.sandbox_server.cluster.discovery import CLUSTER_PATH, SandboxClusterMap, SandboxHolderInfo
from agentrl.serving.children import free_port
from agentrl.serving.holders import AddHolders, DrainHolder, PoolError, PoolSettings, lifespan
from agentrl.serving.supervisor import MAX_RESTARTS, ProcessHolders

log = logging.getLogger("agentrl.sandbox")
STOP_TIMEOUT_S = 30.0
TOKEN_ENV_VAR = "AGENTRL_SANDBOX_TOKEN"
__all__ = ["MAX_RESTARTS", "SandboxProcesses", "free_port", "front_app", "processes_app"]


class SandboxProcesses(ProcessHolders[SandboxHolderInfo]):
    """`count` child sandbox servers of this process (the serving kit's `ProcessHolders`);
    `serve_args(name, port)` is one child's command line after `agentrl sandbox serve`, and `token`
    its `--token` (given by environment, not argv)."""

    def __init__(self, serve_args: Callable[[str, int], list[str]], *, host: str, count: int,
                 base_name: str, token: str | None = None) -> None:
        # the token goes to the children by environment; their /health asks none
        settings = PoolSettings("live_sandboxes", log, {TOKEN_ENV_VAR: token or None},
                                noun="sandbox holder", held="sandboxes")
        super().__init__(SandboxHolderInfo, settings, self._command, host=host, base_name=base_name,
                         stop_timeout_s=STOP_TIMEOUT_S)
        self.serve_args = serve_args
        self.count = count

    def _command(self, name: str, port: int) -> list[str]:
        return [sys.executable, "-m", "agentrl", "sandbox", "serve", *self.serve_args(name, port)]

    def snapshot(self) -> SandboxClusterMap:
        return SandboxClusterMap(holders=self.infos())


def front_app(pool: SandboxProcesses, tokens: set[str], token: str | None = None) -> FastAPI:
    """The address of a cluster of sandbox servers: `GET /v1/cluster`, scale-up, drain and `/health`.

    With `tokens` (the server's token and tenants' tokens), the map is read with any one of them;
    holders are added and drained with the server's own `token` alone (a tenant shares the servers,
    it does not run them), and by no one where tenants' tokens are given without it.
    """

    app = FastAPI(title="agentrl sandbox cluster", lifespan=lifespan(pool, pool.count),
                  description="Where the sandbox servers of this address are; sandboxes go to them directly.")

    @app.exception_handler(PoolError)
    async def pool_error(request: Request, exc: PoolError) -> JSONResponse:
        return JSONResponse({"detail": exc.message, "kind": exc.code}, exc.status)

    @app.get("/health")
    async def health() -> dict[str, object]:
        return pool.health()

    @app.get(CLUSTER_PATH, response_model=SandboxClusterMap)
    async def cluster(request: Request) -> Response:
        if not _bearer_in(request, tokens):
            return _unauthorized()
        return Response(pool.snapshot().model_dump_json(), media_type="application/json")

    @app.post(f"{CLUSTER_PATH}/holders", response_model=SandboxClusterMap, status_code=201)
    async def add(request: Request, req: AddHolders) -> Response:
        if not _bearer_in(request, tokens, {token} if token else set()):
            return _unauthorized()
        made = SandboxClusterMap(holders=await pool.add(req.n))
        return Response(made.model_dump_json(), status_code=201, media_type="application/json")

    @app.post(f"{CLUSTER_PATH}/holders/{{holder}}/drain", response_model=SandboxHolderInfo)
    async def drain(request: Request, holder: str, req: DrainHolder | None = None) -> Response:
        if not _bearer_in(request, tokens, {token} if token else set()):
            return _unauthorized()
        drained = await pool.drain(holder, None if req is None else req.within_s)
        return Response(drained.model_dump_json(), media_type="application/json")

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "DELETE"], include_in_schema=False)
    async def elsewhere(path: str) -> JSONResponse:
        return JSONResponse({"detail": f"this address serves several sandbox servers: read {CLUSTER_PATH} "
                             "and call the server a sandbox id names (agentrl.sandbox_server.SandboxCluster "
                             f"does it when given this address's {CLUSTER_PATH} URL)",
                             "kind": "cluster_address"}, 421)

    return app


def _bearer_in(request: Request, guarded: set[str], accepted: set[str] | None = None) -> bool:
    """Whether `request` may pass where `guarded` are the tokens that guard the address (none: it is
    open): its bearer token is one of `accepted` (default: `guarded`)."""
    if not guarded:
        return True
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    given = value.strip().encode() if scheme.lower() == "bearer" else b""
    return any(hmac.compare_digest(given, t.encode()) for t in (guarded if accepted is None else accepted))


def _unauthorized() -> JSONResponse:
    return JSONResponse({"detail": "missing or wrong token", "kind": "unauthorized"}, 401,
                        headers={"WWW-Authenticate": "Bearer"})


def processes_app(serve_args: Callable[[str, int], list[str]], *, host: str, count: int, base_name: str,
                  token: str | None, tokens: set[str]) -> FastAPI:
    """The address of `count` sandbox servers, children of this process started when it starts serving
    (`agentrl.serving.runner.run_server` serves it in the foreground); `token` is the servers'
    `--token`, `tokens` every token that may read the map."""
    pool = SandboxProcesses(serve_args, host=host, count=count, base_name=base_name, token=token)
    return front_app(pool, tokens, token)
