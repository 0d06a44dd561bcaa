"""`agentrl serve --processes N`: N server processes on one machine, one per core.

Each child runs `agentrl serve` unchanged on its own loopback port under its own holder name; the
parent serves the cluster's address (`agentrl.server.cluster.pool.cluster_app`) and supervises them. A child
that exits is reported and started again on its port under its name (at most `MAX_RESTARTS` times),
so a client finds it where it was, without the episodes it held (the client replays those). The
children die with the parent however it ends: each asks the kernel for SIGKILL when its parent
goes (`PR_SET_PDEATHSIG`), and a parent that stops normally terminates them first. The supervision
is the serving kit's (`agentrl.serving.supervisor`), shared with `agentrl sandbox serve --processes`.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import replace

from fastapi import FastAPI

from agentrl.protocol import HolderInfo, dumps
from agentrl.server.cluster.pool import cluster_app, holder_environment, pool_settings
from agentrl.server.config import ServerConfig
from agentrl.serving.supervisor import MAX_RESTARTS, ProcessHolders

STOP_TIMEOUT_S = 15.0
__all__ = ["MAX_RESTARTS", "ProcessPool", "processes_app", "serve_args"]


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
    if config.state_dir:
        args += ["--state-dir", config.state_dir]
    args += ["--ended-memory", str(config.ended_memory)]
    if not config.ui:
        args.append("--no-ui")
    return args


class ProcessPool(ProcessHolders[HolderInfo]):
    """Holders as child processes of this one, on loopback ports of this machine (the serving kit's
    `ProcessHolders`, each child an `agentrl serve` of `config`)."""

    def __init__(self, config: ServerConfig, log_level: str = "warning") -> None:
        environment = holder_environment(config.resolved_token(), config.resolved_operator_token())
        settings = pool_settings(config.resolved_token(), environment)
        super().__init__(HolderInfo, settings, self._command, host=config.host,
                         base_name=config.resolved_holder(), stop_timeout_s=STOP_TIMEOUT_S)
        # a holder restarted under its name reads what it ended from here: a directory of this run's
        # where the operator gave none
        self.state_dir = None if config.state_dir else tempfile.TemporaryDirectory(prefix="agentrl-holders-")
        if self.state_dir is not None:
            config = replace(config, state_dir=self.state_dir.name)
        self.config = config
        self.log_level = log_level

    async def stop(self) -> None:
        await super().stop()
        if self.state_dir is not None:
            self.state_dir.cleanup()

    def _command(self, name: str, port: int) -> list[str]:
        child = replace(self.config, port=port, holder=name)
        return [sys.executable, "-m", "agentrl", "serve", *serve_args(child, self.log_level)]


def processes_app(config: ServerConfig, processes: int, log_level: str = "warning") -> FastAPI:
    """The cluster's address with `processes` holders, children of this process started when it
    starts serving (`agentrl.serving.runner.run_server` serves it in the foreground)."""
    config.check()
    return cluster_app(ProcessPool(config, log_level), processes, config.resolved_token(),
                       config.resolved_operator_token())
