"""`agentrl sandbox serve --processes N`: N sandbox-server processes behind one address.

One sandbox server is one Python process: its event loop and JSON work run on one core, so execs/s
stop growing with sandboxes long before Docker does. Here each child runs the unchanged
`agentrl sandbox serve` on its own loopback port under its own holder name (`<name>-p<i>`), with a
Docker backend, warm pool and sandboxes of its own; sandbox ids carry the holder's name. The parent
serves the address a user is given: `GET /v1/cluster` (the holders, their URLs, states and open
sandboxes, read from each one's `/health` by the health watcher of `agentrl.cluster.holders`) and
`/health`; every other path answers 421 naming the map, since the sandbox traffic goes to the holders directly
(`agentrl.sandbox_server.clients.cluster.SandboxCluster` does that for a client).

Why not uvicorn's `--workers`: its workers share one socket and the kernel hands each connection
to any of them, while a sandbox lives in the one process that made it; calls must reach their
holder, which only the client can do by the id. The supervision is the cluster kit's
(`agentrl.cluster.supervisor`, shared with `agentrl serve --processes`), which knows no env.

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

from agentrl.cluster.children import free_port
from agentrl.cluster.holders import PoolSettings, lifespan
from agentrl.cluster.serving import uvicorn_config
from agentrl.cluster.supervisor import MAX_RESTARTS, ProcessHolders
from agentrl.sandbox_server.cluster.discovery import CLUSTER_PATH, SandboxClusterMap, SandboxHolderInfo

log = logging.getLogger("agentrl.sandbox")
STOP_TIMEOUT_S = 30.0
TOKEN_ENV_VAR = "AGENTRL_SANDBOX_TOKEN"
__all__ = ["MAX_RESTARTS", "SandboxProcesses", "free_port", "front_app", "run_processes"]


class SandboxProcesses(ProcessHolders[SandboxHolderInfo]):
    """`count` child sandbox servers of this process (the cluster kit's `ProcessHolders`);
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


def front_app(pool: SandboxProcesses, tokens: set[str]) -> FastAPI:
    """The address of a cluster of sandbox servers: `GET /v1/cluster` and `/health`.

    With `tokens` (the server's token and tenants' tokens), the map is read with any one of them.
    """

    app = FastAPI(title="agentrl sandbox cluster", lifespan=lifespan(pool, pool.count),
                  description="Where the sandbox servers of this address are; sandboxes go to them directly.")

    def allowed(request: Request) -> bool:
        if not tokens:
            return True
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        given = value.strip().encode() if scheme.lower() == "bearer" else b""
        return any(hmac.compare_digest(given, t.encode()) for t in tokens)

    @app.get("/health")
    async def health() -> dict[str, object]:
        return pool.health()

    @app.get(CLUSTER_PATH, response_model=SandboxClusterMap)
    async def cluster(request: Request) -> Response:
        if not allowed(request):
            return JSONResponse({"detail": "missing or wrong token", "kind": "unauthorized"}, 401,
                                headers={"WWW-Authenticate": "Bearer"})
        return Response(pool.snapshot().model_dump_json(), media_type="application/json")

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "DELETE"], include_in_schema=False)
    async def elsewhere(path: str) -> JSONResponse:
        return JSONResponse({"detail": f"this address serves several sandbox servers: read {CLUSTER_PATH} "
                             "and call the server a sandbox id names (agentrl.sandbox_server.SandboxCluster "
                             f"does it when given this address's {CLUSTER_PATH} URL)",
                             "kind": "cluster_address"}, 421)

    return app


def run_processes(serve_args: Callable[[str, int], list[str]], *, host: str, port: int, count: int,
                  base_name: str, token: str | None, tokens: set[str], log_level: str = "warning") -> None:
    """Serve the address in the foreground with `count` sandbox servers until SIGINT/SIGTERM;
    `token` is the servers' `--token`, `tokens` every token that may read the map."""
    import uvicorn

    pool = SandboxProcesses(serve_args, host=host, count=count, base_name=base_name, token=token)
    uvicorn.Server(uvicorn_config(front_app(pool, tokens), host=host, port=port, log_level=log_level)).run()
