"""SandboxFusion's `/run_code` on top of sandboxes: stateless calls served by wiped runner sandboxes.

A container start costs far more than a call, so calls do not each get a new container: a runner
serves one call at a time, then its agent wipes it back to a new sandbox's state (every process of
the user killed with kill(-1) as that user, /workspace, /tmp, /dev/shm, /dev/mqueue and SysV IPC
emptied and those directories put back in a fixed state (mode, no xattr or ACL, fixed times), the
agent's own files gone) and checks that nothing is left; a runner whose wipe fails,
or that served `max_uses` calls, is dropped. Code in one call cannot reach the agent (another uid),
so nothing of one caller reaches the next. A call with its own memory limit gets its own sandbox.
Calls wait on no wipe: the runner is wiped after the answer has gone out, and a few runners are
kept, so the next caller takes another, already clean one.
"""

from __future__ import annotations

import base64
import contextlib
import secrets
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from agentrl.sandbox_server.sandboxes.backend import Backend, log
from agentrl.sandbox_server.sandboxes.sandbox import AgentSandbox
from agentrl.sandbox_server.wire.errors import InvalidRequest, SandboxError
from agentrl.sandbox_server.wire.languages import language
from agentrl.sandbox_server.wire.models import (
    CommandRunResult,
    ExecResult,
    RunCodeRequest,
    RunCodeResponse,
    decode_base64,
)

if TYPE_CHECKING:
    from agentrl.sandbox_server.api.metrics import SandboxMetrics

MAX_OUTPUT_BYTES = 1 << 20
MAX_FETCH_BYTES = 8 << 20  # a file asked for in `fetch_files`; a bigger one is left out like a missing one
WAIT_FOR_WIPE_S = 0.25


def b64decode(data: str, what: str) -> bytes:
    try:
        return decode_base64(data)
    except ValueError as exc:
        reason = str(exc)
    raise InvalidRequest(f"{what} is {reason}")  # outside the handler, as in `decode_base64`


class RunCodeService:
    """Runners for `/run_code`. At least `min_runners` are kept once used, so that a caller finds a
    clean one while the previous caller's is being wiped (the wipe is then off every caller's path)."""

    def __init__(
        self,
        backend: Backend,
        *,
        max_uses: int = 1000,
        max_idle: int = 16,
        min_runners: int = 4,
        metrics: SandboxMetrics | None = None,
    ):
        self.backend = backend
        self.max_uses = max_uses
        self.max_idle = max_idle
        self.min_runners = min_runners
        self.metrics = metrics
        self._idle: deque[tuple[AgentSandbox, int]] = deque()
        self._lock = threading.Condition()
        self._wiping = 0
        self._runners = 0  # runners in use, being wiped or idle
        # long-lived threads: a call hands its runner over without waiting for a thread to start
        self._wipers = ThreadPoolExecutor(max_idle, thread_name_prefix="run-code-wipe")

    def _take(self) -> tuple[AgentSandbox, int]:
        """An idle runner; if none, a new sandbox while there are fewer than `min_runners`; else wait
        a little for a wipe (a few milliseconds, where a container start may take a second)."""
        with self._lock:
            deadline = time.monotonic() + WAIT_FOR_WIPE_S
            while self._idle or (
                self._wiping and self._runners >= self.min_runners and time.monotonic() < deadline
            ):
                if not self._idle:
                    self._lock.wait(max(deadline - time.monotonic(), 0.0))
                    continue
                sandbox, uses = self._idle.pop()  # the most recently used: the oldest ones may expire
                if not sandbox.closed_reason and not sandbox.dead:
                    return sandbox, uses
                self._runners -= 1
                sandbox.close()
            self._runners += 1
        try:
            return self.backend.create(), 0
        except BaseException:
            with self._lock:
                self._runners -= 1
            raise

    def _drop(self, sandbox: AgentSandbox) -> None:
        with self._lock:
            self._runners -= 1
        sandbox.close()

    def _recycle(self, sandbox: AgentSandbox, uses: int) -> None:
        try:
            if uses < self.max_uses:
                sandbox.wipe()
                with self._lock:
                    if len(self._idle) < self.max_idle:
                        self._idle.append((sandbox, uses))
                        self._lock.notify_all()
                        return
        except SandboxError as exc:
            log.warning("run_code runner dropped: %s", exc)
        except Exception:  # a bug: said aloud here, since no one waits on this thread's result
            log.exception("run_code runner dropped")
        finally:
            with self._lock:
                self._wiping -= 1
                self._lock.notify_all()
        self._drop(sandbox)

    def run(self, req: RunCodeRequest) -> RunCodeResponse:
        response = self._run(req)
        if self.metrics is not None:
            self.metrics.run_code.labels(response.status).inc()
        return response

    def _run(self, req: RunCodeRequest) -> RunCodeResponse:
        lang = language(req.language)
        try:
            files = {path: b64decode(data or "", f"files[{path!r}]") for path, data in req.files.items()}
        except InvalidRequest as exc:
            return RunCodeResponse(status="SandboxError", message=str(exc))
        own_shape = req.memory_limit_MB >= 32
        if own_shape:
            sandbox, uses = (
                self.backend.create(memory_mb=req.memory_limit_MB, ttl_s=req.run_timeout + 600.0),
                0,
            )
        else:
            sandbox, uses = self._take()
        healthy = False
        binary = f"/tmp/.program-{secrets.token_hex(8)}"
        compiled: ExecResult | None = None
        result: ExecResult | None = None
        try:
            for path, data in files.items():
                sandbox.write_file(path, data)
            if lang.compile is not None:
                compiled = sandbox.exec(
                    lang.compile.replace("{binary}", binary),
                    timeout_s=max(req.compile_timeout, 0.001),
                    mode="oneshot",
                    max_output_bytes=MAX_OUTPUT_BYTES,
                    script=req.code,
                    script_suffix=lang.suffix,
                )
            if compiled is None or compiled.status == "ok":
                result = sandbox.exec(
                    lang.run.replace("{binary}", binary),
                    timeout_s=max(req.run_timeout, 0.001),
                    stdin=req.stdin,
                    mode="oneshot",
                    max_output_bytes=MAX_OUTPUT_BYTES,
                    script=req.code,
                    script_suffix=lang.suffix,
                )
            fetched: dict[str, str] = {}
            for path in req.fetch_files:
                with contextlib.suppress(FileNotFoundError, InvalidRequest):  # missing files are left out
                    fetched[path] = base64.b64encode(sandbox.read_file(path, MAX_FETCH_BYTES)).decode()
            healthy = True
        except InvalidRequest as exc:
            healthy = True
            return RunCodeResponse(status="SandboxError", message=str(exc))
        except SandboxError as exc:
            return RunCodeResponse(status="SandboxError", message=str(exc))
        finally:
            if healthy and not own_shape:  # wiped after the answer has gone out
                with self._lock:
                    self._wiping += 1
                self._wipers.submit(self._recycle, sandbox, uses + 1)
            elif own_shape:
                sandbox.close()
            else:
                self._drop(sandbox)
        return to_response(compiled, result, fetched)

    def close(self) -> None:
        """Close the idle runners, after the wipes under way have finished (so none comes back later)."""
        with self._lock:
            self._lock.wait_for(lambda: self._wiping == 0, timeout=60)
            idle, self._idle = list(self._idle), deque()
            self._runners -= len(idle)
        for sandbox, _ in idle:
            sandbox.close()


def command_result(result: ExecResult) -> CommandRunResult:
    """SandboxFusion's shape: a program ended by signal N has return code -N, as Python reports it."""
    return CommandRunResult(
        status="TimeLimitExceeded" if result.status == "timeout" else "Finished",
        execution_time=result.duration_ms / 1000.0,
        return_code=-result.signal if result.signal else result.exit_code,
        stdout=result.stdout,
        stderr=result.stderr,
    )


def to_response(
    compiled: ExecResult | None, result: ExecResult | None, files: dict[str, str]
) -> RunCodeResponse:
    """SandboxFusion's statuses: a failed compile, a time-out or a non-zero exit is `Failed`."""
    ok = result is not None and result.status == "ok"
    return RunCodeResponse(
        status="Success" if ok else "Failed",
        compile_result=command_result(compiled) if compiled is not None else None,
        run_result=command_result(result) if result is not None else None,
        files=files,
    )
