"""A server of one's own for each episode: how MCP-v0 starts one for a task, and the warm pool that
starts the next ones ahead of time.

`isolation="process"` runs the server as a local subprocess of the env's process in a fresh temp
folder: the task's files are written there, its setup script runs there (bash, a minimal
environment), then the server starts with that folder as its working directory and `HOME`. It is
not a sandbox: the server runs with the env's user's rights, can read the host's files and reach
the network. Use it for servers you trust, and tests. The default, `isolation="sandbox"`, runs it
in a container (`agentrl.mcp.sandboxed`). A streamable-HTTP URL is one server for every episode:
nothing is isolated, and tasks may not set up files there.

An episode's workspace as the agent and the checks name it ("{workspace}" in prompts, setup calls
and check arguments) is "." in process isolation (the server's working directory): the temp
folder's name changes every episode, and a path the agent read would point a forked episode, which
replays the agent's calls, at its parent's folder. The server's command line gets the folder's
absolute path.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agentrl.mcp.client import CLOSE_TIMEOUT_S, Connection, ToolListing, event_loop
from agentrl.mcp.rendering import render_result
from agentrl.mcp.tasks import Task, substitute

SETUP_TIMEOUT_S = 120.0
SETUP_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


class EpisodeServer(Protocol):
    """A started server, set up for one task: what the env steps through."""

    task_id: str
    workspace: str  # "{workspace}" as the agent and the checks see it
    listing: ToolListing
    setup_seconds: float  # the task's own setup (files, script, setup calls), within the start

    def call(self, name: str, arguments: dict[str, Any], timeout_s: float, limit: int) -> tuple[str, bool]:
        """`tools/call`: the result as text (`rendering.render_result`, clipped to `limit`) and whether
        it is an error result; raises `ServerFailure` when the server fails."""
        ...

    def take_junk(self) -> tuple[int, list[str]]: ...

    def close(self) -> None: ...


@dataclass
class LocalServer:
    """A stdio server in a temp folder of this machine, or a session with a streamable-HTTP server."""

    task_id: str
    workspace: str
    connection: Connection
    listing: ToolListing
    setup_seconds: float
    home: Path | None

    def call(self, name: str, arguments: dict[str, Any], timeout_s: float, limit: int) -> tuple[str, bool]:
        result = event_loop().run(
            self.connection.call_tool(name, arguments, timeout_s), timeout_s + CLOSE_TIMEOUT_S
        )
        return render_result(result, limit), bool(result.get("isError"))

    def take_junk(self) -> tuple[int, list[str]]:
        return self.connection.take_junk()

    def close(self) -> None:
        try:
            event_loop().run(self.connection.aclose(), 2 * CLOSE_TIMEOUT_S)
        finally:
            if self.home is not None:
                shutil.rmtree(self.home, ignore_errors=True)


def setup_calls(server: EpisodeServer, task: Task, timeout_s: float) -> None:
    """The task's setup tool calls, through the server; any error fails the setup, loudly."""
    for call in task.setup_calls:
        text, is_error = server.call(
            call["name"], substitute(call["arguments"], server.workspace), timeout_s, 1000
        )
        if is_error:
            raise RuntimeError(f"task {task.id!r}: setup call {call['name']} failed: {text[:300]}")


def start_local(
    task: Task, server: list[str] | str, *, call_timeout_s: float, max_tools: int, start_timeout_s: float
) -> LocalServer:
    """Start `server` for `task` (process isolation, or a URL) with its workspace set up."""
    began = time.perf_counter()
    home: Path | None = None
    if isinstance(server, str):
        connection = Connection(url=server)
    else:
        home = Path(tempfile.mkdtemp(prefix="agentrl-mcp-"))
        workspace = home / "workspace"
        workspace.mkdir()
        for relative, text in task.files.items():
            path = workspace / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        if task.script:
            done = subprocess.run(
                ["bash", "-c", substitute(task.script, str(workspace))],
                cwd=workspace,
                env={**SETUP_ENV, "HOME": str(home)},
                capture_output=True,
                text=True,
                timeout=SETUP_TIMEOUT_S,
                check=False,
            )
            if done.returncode != 0:
                shutil.rmtree(home, ignore_errors=True)
                raise RuntimeError(
                    f"task {task.id!r}: setup script failed ({done.returncode}): {done.stderr[-500:]}"
                )
        connection = Connection(
            argv=substitute(list(server), str(workspace)),
            cwd=str(workspace),
            env={"HOME": str(home)},
            errlog=home / "server.stderr",
        )
    setup_seconds = time.perf_counter() - began
    opened = None
    try:
        event_loop().run(connection.open(start_timeout_s), start_timeout_s + CLOSE_TIMEOUT_S)
        listing = event_loop().run(connection.list_tools(max_tools), start_timeout_s + CLOSE_TIMEOUT_S)
        opened = LocalServer(task.id, ".", connection, listing, setup_seconds, home)
        calls_began = time.perf_counter()
        setup_calls(opened, task, call_timeout_s)
        opened.setup_seconds += time.perf_counter() - calls_began
        connection.take_junk()  # a banner before the first answer is nothing the episode did
        return opened
    except BaseException:
        if opened is not None:
            opened.close()
        else:
            with contextlib.suppress(Exception):  # the failure being raised says what went wrong
                event_loop().run(connection.aclose(), 2 * CLOSE_TIMEOUT_S)
            if home is not None:
                shutil.rmtree(home, ignore_errors=True)
        raise


def task_key(task: Task) -> str:
    """What tells tasks apart in a pool: their whole content (two task files may reuse an id)."""
    return json.dumps(task.raw, sort_keys=True, default=str)


class WarmPool:
    """Servers started ahead of time for the next episodes, at most `size`, closed on `close`.

    Servers are per task (a server starts in its task's workspace), so the pool keeps servers for
    the tasks just played: GRPO plays a task several times in a row, and each of its episodes after
    the first takes a warm server. Taking one starts its replacement in the background; the oldest
    warm server of another task makes room when the pool is full. A start that failed is raised by
    the `take` that finds it."""

    def __init__(self, start: Callable[[Task], EpisodeServer], size: int) -> None:
        self.start, self.size = start, size
        self.ready: OrderedDict[str, deque[Future[EpisodeServer]]] = OrderedDict()
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def take(self, task: Task) -> EpisodeServer:
        """A warm server for `task` if one is ready or starting, else one started now; then another
        warm one is started for the task's next episode."""
        key = task_key(task)
        with self._lock:
            waiting = self.ready.get(key)
            future = waiting.popleft() if waiting else None
            if waiting is not None and not waiting:
                del self.ready[key]
        self.refill(task)
        return future.result() if future is not None else self.start(task)

    def refill(self, task: Task) -> None:
        if self.size < 1:
            return
        key = task_key(task)
        with self._lock:
            if sum(len(q) for q in self.ready.values()) >= self.size:
                oldest = next((k for k in self.ready if k != key), None)
                if oldest is None:
                    return
                for future in self.ready.pop(oldest):
                    discard(future)
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentrl-mcp-pool")
            self.ready.setdefault(key, deque()).append(self._executor.submit(self.start, task))

    def close(self) -> None:
        with self._lock:
            futures = [f for q in self.ready.values() for f in q]
            self.ready.clear()
            executor, self._executor = self._executor, None
        for future in futures:
            discard(future)
        if executor is not None:
            executor.shutdown(wait=True)


_closer_lock = threading.Lock()
_closer: ThreadPoolExecutor | None = None


def close_later(server: EpisodeServer) -> Future[None]:
    """Close `server` on a background thread: a reset does not wait for the last episode's server to
    stop (the SDK gives a server seconds to exit); whoever must know it stopped waits on the future."""
    global _closer
    with _closer_lock:
        if _closer is None:
            _closer = ThreadPoolExecutor(max_workers=4, thread_name_prefix="agentrl-mcp-close")
        return _closer.submit(server.close)


_pools_lock = threading.Lock()
_pools: dict[Any, tuple[WarmPool, int]] = {}  # config -> (its pool, how many envs use it)


def shared_pool(key: Any, start: Callable[[Task], EpisodeServer], size: int) -> WarmPool:
    """The pool of the envs of this process with configuration `key` (hashable): envs that play one
    task side by side (a GRPO group) take each other's warm servers. Its size is the first such env's.
    Give it back with `release_pool`."""
    with _pools_lock:
        pool, users = _pools.get(key, (None, 0))
        if pool is None:
            pool = WarmPool(start, size)
        _pools[key] = (pool, users + 1)
        return pool


def release_pool(key: Any) -> None:
    """One env fewer uses the pool of `key`; the last one closes it (every warm server with it)."""
    with _pools_lock:
        pool, users = _pools[key]
        if users > 1:
            _pools[key] = (pool, users - 1)
            return
        del _pools[key]
    pool.close()


def discard(future: Future[EpisodeServer]) -> None:
    """Close a pooled server once it has started (a failed start left nothing to close)."""

    def close(done: Future[EpisodeServer]) -> None:
        if not done.cancelled() and done.exception() is None:
            done.result().close()

    if not future.cancel():
        future.add_done_callback(close)


@dataclass(frozen=True)
class ServerConfig:
    """How an env starts its episodes' servers (hashable: envs with one config share a pool)."""

    server: tuple[str, ...] | str  # a stdio command line, or a streamable-HTTP URL
    isolation: str
    sandbox_url: str | None = None
    sandbox_token: str | None = None
    image: str | None = None
    call_timeout_s: float = 10.0
    start_timeout_s: float = 60.0
    max_tools: int = 128
