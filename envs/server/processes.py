"""`agentrl serve --processes N`: N server processes on one machine, one per core.

Each child runs `agentrl serve` unchanged on its own loopback port under its own holder name; the
parent serves the cluster's address (`agentrl.server.pool.cluster_app`) and supervises them. A child
that exits is reported and started again on its port under its name (at most `MAX_RESTARTS` times),
so a client finds it where it was, without the episodes it held (the client replays those). The
children die with the parent however it ends: each asks the kernel for SIGKILL when its parent
goes (`PR_SET_PDEATHSIG`), and a parent that stops normally terminates them first.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
from dataclasses import replace

from agentrl.protocol import dumps
from agentrl.server.config import ServerConfig
from agentrl.server.local import free_port
from agentrl.server.pool import Holder, HolderPool

log = logging.getLogger("agentrl.server")
MAX_RESTARTS = 5
STOP_TIMEOUT_S = 15.0
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Run in the child before exec: the kernel sends it SIGKILL when the parent dies (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def serve_args(config: ServerConfig, log_level: str) -> list[str]:
    """The `agentrl serve` arguments that run one holder of `config` (its token goes by environment)."""
    args = ["--host", config.host, "--port", str(config.port), "--max-episodes", str(config.max_episodes),
            "--idle-ttl", str(config.idle_ttl_s), "--max-age", str(config.max_age_s),
            "--max-action-chars", str(config.max_action_chars), "--workers", str(config.workers),
            "--log-level", log_level]
    for env_id in config.env_ids or ():
        args += ["--env", env_id]
    if config.default_env_id:
        args += ["--default-env", config.default_env_id]
    for env_id, kwargs in config.env_kwargs.items():
        args += ["--env-kwargs", f"{env_id}={dumps(kwargs).decode()}"]
    if config.holder:
        args += ["--holder", config.holder]
    if not config.ui:
        args.append("--no-ui")
    return args


class ProcessPool(HolderPool):
    """Holders as child processes of this one, on loopback ports of this machine."""

    def __init__(self, config: ServerConfig, log_level: str = "warning") -> None:
        super().__init__(config.resolved_token(), config.resolved_operator_token())
        self.config = config
        self.log_level = log_level
        self.base_name = config.resolved_holder()
        self._made = 0

    def _spawn(self, name: str, port: int) -> subprocess.Popen:
        child = replace(self.config, port=port, holder=name)
        env = {**os.environ, **self.holder_env}
        command = [sys.executable, "-m", "agentrl", "serve", *serve_args(child, self.log_level)]
        return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, preexec_fn=_die_with_parent)

    async def _launch(self, count: int) -> list[Holder]:
        made = []
        for _ in range(count):
            name, port = f"{self.base_name}-p{self._made}", free_port(self.config.host)
            self._made += 1
            url = f"http://{self.config.host}:{port}"
            made.append(Holder(name, url, handle=self._spawn(name, port)))
        return made

    def _running(self, holder: Holder) -> bool:
        return holder.handle.poll() is None

    async def _lost(self, holder: Holder) -> None:
        code = holder.handle.returncode
        if holder.state == "draining":
            log.warning("holder %s exited with code %s while draining", holder.name, code)
            await super()._lost(holder)
            return
        if holder.restarts >= MAX_RESTARTS:
            log.error("holder %s exited with code %s; not restarted (%d restarts already)",
                      holder.name, code, holder.restarts)
            await super()._lost(holder)
            return
        holder.restarts += 1
        log.warning("holder %s exited with code %s; restarting it (restart %d of %d), its episodes are lost",
                    holder.name, code, holder.restarts, MAX_RESTARTS)
        port = int(holder.url.rsplit(":", 1)[1])
        holder.state, holder.live_episodes = "starting", 0
        holder.handle = self._spawn(holder.name, port)

    async def _retire(self, holder: Holder) -> None:
        proc: subprocess.Popen = holder.handle
        if proc.poll() is not None:
            return
        proc.terminate()  # the server closes its episodes and exits
        try:
            await asyncio.to_thread(proc.wait, STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            await asyncio.to_thread(proc.wait)


def run_processes(config: ServerConfig, processes: int, log_level: str = "warning") -> None:
    """Serve the cluster's address in the foreground with `processes` holders until SIGINT/SIGTERM."""
    import uvicorn

    from agentrl.server.pool import cluster_app

    config.check()
    pool = ProcessPool(config, log_level)
    app = cluster_app(pool, processes, config.resolved_token())
    uvicorn.Server(uvicorn.Config(app, host=config.host, port=config.port, log_level=log_level,
                                  access_log=False)).run()
