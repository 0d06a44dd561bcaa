"""NOT ISOLATED: sandboxes as plain child processes in temporary directories, for development only.

Commands run as the current user with full access to the machine and the network; there are no
memory, process or CPU limits. It exists so the API can be tried where Docker is not installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from typing import Any

from agentrl.sandbox_server.agent import PROGRAM as AGENT_PROGRAM
from agentrl.sandbox_server.sandboxes.backend import Backend, log
from agentrl.sandbox_server.sandboxes.channel import AgentLink, PipeChannel
from agentrl.sandbox_server.wire.models import SandboxSpec

WARNING = (
    "agentrl LocalBackend runs commands WITHOUT ANY ISOLATION as your own user (no container, no limits, "
    "network on). Use it for development only; use DockerBackend for anything a model writes."
)


class LocalBackend(Backend):
    """Opt-in, unisolated: a temp dir and a child process per sandbox."""

    kind = "local"

    def __init__(
        self, *, max_sandboxes: int = 64, reap_interval_s: float = 2.0, defaults: SandboxSpec | None = None
    ):
        warnings.warn(WARNING, stacklevel=2)
        log.warning(WARNING)
        super().__init__(max_sandboxes=max_sandboxes, reap_interval_s=reap_interval_s, defaults=defaults)

    def _acquire(self, spec: SandboxSpec) -> tuple[AgentLink, Any]:
        root = tempfile.mkdtemp(prefix="agentrl-local-sandbox-")
        workdir = os.path.join(root, "workspace")
        os.makedirs(workdir)
        env = {
            **os.environ,
            "HOME": workdir,
            "AGENTRL_AGENT_ISOLATED": "0",
            "AGENTRL_AGENT_WORKDIR": workdir,
            "AGENTRL_AGENT_STATE": os.path.join(root, "state"),
        }
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", AGENT_PROGRAM],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=workdir,
            env=env,
            start_new_session=True,
        )
        link = AgentLink(PipeChannel(proc))
        link.call("hello", wait_s=30.0)
        return link, root

    def _release(self, handle: Any) -> None:
        shutil.rmtree(handle, ignore_errors=True)
