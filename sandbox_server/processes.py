"""`agentrl sandbox serve --processes N`: N sandbox-server processes behind one address.

One sandbox server is one Python process: its event loop and JSON work run on one core, so execs/s
stop growing with sandboxes long before Docker does. Here each child runs the unchanged
`agentrl sandbox serve` on its own loopback port under its own holder name (`<name>-p<i>`), with a
Docker backend, warm pool and sandboxes of its own; sandbox ids carry the holder's name. The parent
serves the address a user is given: `GET /v1/cluster` (the holders, their URLs, states and open
sandboxes, read from each one's `/health` every `HEALTH_INTERVAL_S`) and `/health`; every other
path answers 421 naming the map, since the sandbox traffic goes to the holders directly
(`agentrl.sandbox_server.cluster.SandboxCluster` does that for a client).

Why not uvicorn's `--workers`: its workers share one socket and the kernel hands each connection
to any of them, while a sandbox lives in the one process that made it; calls must reach their
holder, which only the client can do by the id. The supervision is this small module rather than
the env server's process pool because the sandbox server imports nothing from the envs.

A child that exits is reported and started again on its port under its name (at most
`MAX_RESTARTS` times), without the sandboxes it held: a client replays them (`cluster.py`). The
children die with the parent however it ends (`PR_SET_PDEATHSIG` on Linux); a parent that stops
normally terminates them first, and each closes its containers.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import hmac
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from agentrl.sandbox_server.discovery import CLUSTER_PATH, SandboxClusterMap, SandboxHolderInfo

log = logging.getLogger("agentrl.sandbox")
HEALTH_INTERVAL_S = 0.5
MAX_RESTARTS = 5
STOP_TIMEOUT_S = 30.0
TOKEN_ENV_VAR = "AGENTRL_SANDBOX_TOKEN"
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Run in the child before exec: the kernel sends it SIGKILL when the parent dies (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class Holder:
    name: str
    url: str
    port: int
    proc: subprocess.Popen | None = None
    state: str = "starting"
    live_sandboxes: int = 0
    restarts: int = 0

    def info(self) -> SandboxHolderInfo:
        return SandboxHolderInfo(holder=self.name, url=self.url, state=self.state,  # type: ignore[arg-type]  # one of its states
                                 live_sandboxes=self.live_sandboxes)


class SandboxProcesses:
    """Child sandbox servers of this process; `serve_args(name, port)` is one child's command line
    after `agentrl sandbox serve`, and `token` its `--token` (given by environment, not argv)."""

    def __init__(self, serve_args: Callable[[str, int], list[str]], *, host: str, count: int,
                 base_name: str, token: str | None = None) -> None:
        self.serve_args = serve_args
        self.host = host
        self.token = token
        self.holders: dict[str, Holder] = {}
        for i in range(count):
            name, port = f"{base_name}-p{i}", free_port(host)
            self.holders[name] = Holder(name, f"http://{host}:{port}", port)
        self._watch: asyncio.Task | None = None
        self._http: httpx.AsyncClient | None = None

    def snapshot(self) -> SandboxClusterMap:
        return SandboxClusterMap(holders=[h.info() for h in self.holders.values()])

    def _spawn(self, holder: Holder) -> None:
        command = [sys.executable, "-m", "agentrl", "sandbox", "serve",
                   *self.serve_args(holder.name, holder.port)]
        env = dict(os.environ)
        env.pop(TOKEN_ENV_VAR, None)
        if self.token:
            env[TOKEN_ENV_VAR] = self.token
        holder.proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                                       preexec_fn=_die_with_parent)

    async def start(self) -> None:
        self._http = httpx.AsyncClient(timeout=5.0)  # /health asks no token
        for holder in self.holders.values():
            self._spawn(holder)
        self._watch = asyncio.get_running_loop().create_task(self._watch_forever())

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        await asyncio.gather(*(asyncio.to_thread(self._retire, h) for h in self.holders.values()))
        if self._http is not None:
            await self._http.aclose()

    @staticmethod
    def _retire(holder: Holder) -> None:
        holder.state = "down"
        proc = holder.proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()  # the server closes its sandboxes and exits
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    async def _watch_forever(self) -> None:
        while True:
            await asyncio.gather(*(self._check(h) for h in self.holders.values()))
            await asyncio.sleep(HEALTH_INTERVAL_S)

    async def _check(self, holder: Holder) -> None:
        if holder.state == "down" or holder.proc is None:
            return
        code = holder.proc.poll()
        if code is not None:
            holder.live_sandboxes = 0
            if holder.restarts >= MAX_RESTARTS:
                log.error("sandbox holder %s exited with code %s; not restarted (%d restarts already)",
                          holder.name, code, holder.restarts)
                holder.state = "down"
                return
            holder.restarts += 1
            log.warning("sandbox holder %s exited with code %s; restarting it (restart %d of %d), "
                        "its sandboxes are lost", holder.name, code, holder.restarts, MAX_RESTARTS)
            holder.state = "starting"
            self._spawn(holder)
            return
        assert self._http is not None
        try:
            health = (await self._http.get(f"{holder.url}/health")).json()
        except (httpx.HTTPError, ValueError):
            return  # starting, or busy for a moment: whether it runs is `poll`'s to say
        holder.live_sandboxes = int(health.get("live_sandboxes", 0))
        holder.state = "up"


def front_app(pool: SandboxProcesses, tokens: set[str]) -> FastAPI:
    """The address of a cluster of sandbox servers: `GET /v1/cluster` and `/health`.

    With `tokens` (the server's token and tenants' tokens), the map is read with any one of them.
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await pool.start()
        try:
            yield
        finally:
            await pool.stop()

    app = FastAPI(title="agentrl sandbox cluster", lifespan=lifespan,
                  description="Where the sandbox servers of this address are; sandboxes go to them directly.")

    def allowed(request: Request) -> bool:
        if not tokens:
            return True
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        given = value.strip().encode() if scheme.lower() == "bearer" else b""
        return any(hmac.compare_digest(given, t.encode()) for t in tokens)

    @app.get("/health")
    async def health() -> dict[str, object]:
        up = sum(h.state == "up" for h in pool.holders.values())
        return {"status": "healthy" if up else "starting", "holders_up": up}

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
    uvicorn.run(front_app(pool, tokens), host=host, port=port, log_level=log_level, access_log=False)
