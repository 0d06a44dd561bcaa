"""SandboxFusion's `/run_code` on top of sandboxes: stateless calls served by reused runner sandboxes.

A container start costs far more than a call, so calls do not each get a new container: a runner
serves one call at a time and is scrubbed before the next (every process killed, /workspace, /tmp,
/dev/shm and SysV IPC emptied) and replaced after `max_uses` calls or any failure. A call that asks
for its own memory limit gets a fresh sandbox of that shape.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import threading
from collections import deque

from agentrl.sandbox_server.backend import Backend, log
from agentrl.sandbox_server.errors import InvalidRequest, SandboxError
from agentrl.sandbox_server.models import CommandRunResult, ExecResult, RunCodeRequest, RunCodeResponse
from agentrl.sandbox_server.sandbox import AgentSandbox, script_command

SCRUB = "find /workspace /tmp /dev/shm -mindepth 1 -delete 2>/dev/null; ipcrm --all 2>/dev/null; true"
MAX_OUTPUT_BYTES = 1 << 20


def b64decode(data: str, what: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest(f"{what} is not valid base64") from None


class RunCodeService:
    def __init__(self, backend: Backend, *, max_uses: int = 100, max_idle: int = 8):
        self.backend = backend
        self.max_uses = max_uses
        self.max_idle = max_idle
        self._idle: deque[tuple[AgentSandbox, int]] = deque()
        self._lock = threading.Condition()
        self._scrubbing = 0

    def _take(self) -> tuple[AgentSandbox, int]:
        with self._lock:
            while self._idle:
                sandbox, uses = self._idle.pop()  # the most recently used: the oldest ones may expire
                if not sandbox.closed_reason:  # idle runners may have been reaped by their TTL
                    return sandbox, uses
        return self.backend.create(), 0

    def _recycle(self, sandbox: AgentSandbox, uses: int) -> None:
        try:
            if uses < self.max_uses and sandbox.exec(SCRUB, mode="oneshot", timeout_s=30).status == "ok":
                with self._lock:
                    if len(self._idle) < self.max_idle:
                        self._idle.append((sandbox, uses))
                        return
        except SandboxError as exc:
            log.info("run_code runner dropped: %s", exc)
        finally:
            with self._lock:
                self._scrubbing -= 1
                self._lock.notify_all()
        sandbox.close()

    def run(self, req: RunCodeRequest) -> RunCodeResponse:
        try:
            suffix, command = script_command(req.language)
            files = {path: b64decode(data or "", f"files[{path!r}]") for path, data in req.files.items()}
        except InvalidRequest as exc:
            return RunCodeResponse(status="SandboxError", message=str(exc))
        own_shape = req.memory_limit_MB >= 32
        if own_shape:
            sandbox, uses = (
                self.backend.create(memory_mb=req.memory_limit_MB, ttl_s=req.run_timeout + 60.0),
                0,
            )
        else:
            sandbox, uses = self._take()
        healthy = False
        try:
            for path, data in files.items():
                sandbox.write_file(path, data)
            result = sandbox.exec(
                command,
                timeout_s=max(req.run_timeout, 0.001),
                stdin=req.stdin,
                mode="oneshot",
                max_output_bytes=MAX_OUTPUT_BYTES,
                script=req.code,
                script_suffix=suffix,
            )
            fetched: dict[str, str] = {}
            for path in req.fetch_files:
                with contextlib.suppress(FileNotFoundError, InvalidRequest):  # missing files are left out
                    fetched[path] = base64.b64encode(sandbox.read_file(path)).decode()
            healthy = result.status in ("ok", "error", "timeout")
        except InvalidRequest as exc:
            healthy = True
            return RunCodeResponse(status="SandboxError", message=str(exc))
        except SandboxError as exc:
            return RunCodeResponse(status="SandboxError", message=str(exc))
        finally:
            if healthy and not own_shape:  # scrubbed after the answer has gone out
                with self._lock:
                    self._scrubbing += 1
                threading.Thread(target=self._recycle, args=(sandbox, uses + 1), daemon=True).start()
            else:
                sandbox.close()
        return to_response(result, fetched)

    def close(self) -> None:
        """Close the idle runners, after the scrubs under way have finished (so none comes back later)."""
        with self._lock:
            self._lock.wait_for(lambda: self._scrubbing == 0, timeout=60)
            idle, self._idle = list(self._idle), deque()
        for sandbox, _ in idle:
            sandbox.close()


def to_response(result: ExecResult, files: dict[str, str]) -> RunCodeResponse:
    """SandboxFusion's statuses: a time-out or a non-zero exit is `Failed`, else `Success`."""
    run_result = CommandRunResult(
        status="TimeLimitExceeded" if result.status == "timeout" else "Finished",
        execution_time=result.duration_ms / 1000.0,
        return_code=result.exit_code,
        stdout=result.stdout,
        stderr=result.stderr,
    )
    return RunCodeResponse(
        status="Success" if result.status == "ok" else "Failed", run_result=run_result, files=files
    )
