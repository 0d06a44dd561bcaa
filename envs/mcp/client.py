"""The client side of MCP-v0: the official MCP SDK's `ClientSession`, over stdio or streamable HTTP,
driven from the env's synchronous code.

The SDK is async. One event loop runs on a background thread per process (`event_loop`), shared by
every env of the process; a synchronous caller hands it a coroutine and waits for the result, so an
env step blocks only its own thread while the loop serves every open session. A session's transport
and `ClientSession` are entered and left by one task that owns them (anyio's cancel scopes must be
left by the task that entered them); calls are separate tasks on the same loop.

What can go wrong with a server comes back as `ServerFailure` with its `kind`: the server did not
start or answer the handshake ("start"), exited or closed the connection ("crashed"), did not answer
a call within its timeout ("timeout"; the server is then stopped, since a server busy with a lost
call cannot be trusted with the next one), or answered what the protocol does not allow
("protocol"). Lines a stdio server writes to stdout that are not JSON-RPC are counted and kept
(`Connection.take_junk`) for the env to say; the SDK skips them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from agentrl.mcp.rendering import junk_line

T = TypeVar("T")

START_TIMEOUT_S = 60.0
CLOSE_TIMEOUT_S = 15.0  # the SDK's own shutdown: stdin closed, 2 s grace, SIGTERM, 2 s, SIGKILL
MAX_LIST_PAGES = 64  # `tools/list` pages read before the listing is cut
JUNK_KEPT = 3  # stray stdout lines kept verbatim (each clipped); the rest are counted


class ServerFailure(Exception):
    """The MCP server failed as a server (not a tool's own error): `kind` is one of "start",
    "crashed", "timeout", "protocol"."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class EventLoopThread:
    """An asyncio loop on a daemon thread: `run` waits for a coroutine's result, `submit` does not."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="agentrl-mcp-loop", daemon=True)
        self.thread.start()

    def submit(self, coroutine: Awaitable[T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)  # type: ignore[arg-type]

    def run(self, coroutine: Awaitable[T], timeout_s: float | None = None) -> T:
        if threading.current_thread() is self.thread:
            raise RuntimeError("a blocking MCP call from the client's own event loop would deadlock it")
        return self.submit(coroutine).result(timeout_s)


_loop_lock = threading.Lock()
_loop: EventLoopThread | None = None


def event_loop() -> EventLoopThread:
    """The process's MCP event loop, started on first use."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = EventLoopThread()
        return _loop


@dataclass
class ToolListing:
    """What `tools/list` gave: each tool as the server describes it (name, description, inputSchema),
    at most `limit` of them; `more` says the server had more than were read."""

    tools: list[dict[str, Any]]
    more: bool
    limit: int


@dataclass
class Connection:
    """One MCP session with one server: a stdio server started from `argv` in `cwd` (its stderr
    written to `errlog`), or a streamable-HTTP server at `url`."""

    argv: list[str] | None = None
    url: str | None = None
    cwd: str | None = None
    env: dict[str, str] | None = None
    errlog: Path | None = None
    junk: list[str] = field(default_factory=list)
    junk_count: int = 0
    broken: str | None = None  # why the connection can no longer be used
    _session: Any = None
    _stop: asyncio.Event | None = None
    _owner: asyncio.Task[None] | None = None

    # --- opening and closing (coroutines on the loop) ----------------------------------------------
    async def open(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start the server (stdio) or connect (HTTP), and run the handshake."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._owner = asyncio.create_task(self._own(ready))
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout_s)
        except asyncio.TimeoutError:
            await self.aclose()
            raise ServerFailure(
                "start", f"no answer to the MCP handshake within {timeout_s:g} s{self._stderr_tail()}"
            ) from None
        except ServerFailure:
            await self.aclose()
            raise

    async def _own(self, ready: asyncio.Future[None]) -> None:
        """Enter the transport and the session, hold them until asked to stop, then leave them."""
        from mcp import ClientSession

        assert self._stop is not None
        try:
            async with contextlib.AsyncExitStack() as stack:
                streams = await stack.enter_async_context(self._transport(stack))
                session = await stack.enter_async_context(
                    ClientSession(streams[0], streams[1], message_handler=self._on_message)
                )
                await session.initialize()
                self._session = session
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:  # told to the opener, or noted for the next call
            self.broken = self.broken or f"the connection ended: {_describe(exc)}"
            if not ready.done():
                ready.set_exception(ServerFailure("start", f"{_describe(exc)}{self._stderr_tail()}"))
            if not isinstance(exc, Exception):
                raise
        finally:
            self._session = None

    def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        if self.url is not None:
            from mcp.client.streamable_http import streamable_http_client

            return streamable_http_client(self.url)
        from mcp import StdioServerParameters, stdio_client

        assert self.argv, "a stdio server needs a command"
        errlog = stack.enter_context(open(self.errlog, "a")) if self.errlog is not None else None  # noqa: SIM115  # closed by the stack
        params = StdioServerParameters(
            command=self.argv[0],
            args=self.argv[1:],
            cwd=self.cwd,
            env=self.env,
            encoding_error_handler="replace",
        )
        return stdio_client(params, errlog) if errlog is not None else stdio_client(params)

    async def _on_message(self, message: Any) -> None:
        """The SDK hands transport-level problems here: a stdout line that is not JSON-RPC."""
        if isinstance(message, Exception):
            self.junk_count += 1
            if len(self.junk) < JUNK_KEPT:
                self.junk.append(junk_line(message))

    async def aclose(self) -> None:
        """Leave the session and stop the server (the SDK kills a server that does not exit)."""
        self.broken = self.broken or "the connection was closed"
        if self._stop is not None:
            self._stop.set()
        owner, self._owner = self._owner, None
        if owner is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(owner), CLOSE_TIMEOUT_S)
            if not owner.done():
                owner.cancel()

    # --- calls --------------------------------------------------------------------------------------
    async def list_tools(self, limit: int) -> ToolListing:
        """The server's tools, page by page, at most `limit` of them."""
        from mcp.types import PaginatedRequestParams

        session = self._live()
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            params = PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            page = await self._guard(session.list_tools(params=params), START_TIMEOUT_S, "tools/list")
            tools.extend(t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools)
            cursor = page.next_cursor
            if cursor is None or len(tools) >= limit:
                break
        return ToolListing(tools[:limit], len(tools) > limit or cursor is not None, limit)

    async def call_tool(self, name: str, arguments: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """`tools/call`; the result as the protocol's JSON (content, structuredContent, isError)."""
        session = self._live()
        result = await self._guard(session.call_tool(name, arguments), timeout_s, f"the call to '{name}'")
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)

    def take_junk(self) -> tuple[int, list[str]]:
        """The stray stdout lines seen since the last take (count, the first few)."""
        taken = self.junk_count, self.junk
        self.junk_count, self.junk = 0, []
        return taken

    def _live(self) -> Any:
        if self.broken is not None or self._session is None:
            raise ServerFailure("crashed", self.broken or "the server is not connected")
        return self._session

    async def _guard(self, call: Awaitable[T], timeout_s: float, what: str) -> T:
        """Await a request, turning the ways a server fails into `ServerFailure`."""
        from mcp import MCPError
        from pydantic import ValidationError

        try:
            return await asyncio.wait_for(call, timeout_s)
        except asyncio.TimeoutError:
            self.broken = f"{what} did not answer within {timeout_s:g} s; the server was stopped"
            raise ServerFailure("timeout", self.broken) from None
        except MCPError as exc:
            if self._owner is None or self._owner.done() or "closed" in exc.message.lower():
                self.broken = f"the server went away during {what}: {exc.message}{self._stderr_tail()}"
                raise ServerFailure("crashed", self.broken) from None
            raise ServerFailure("protocol", f"{what} failed: error {exc.code}: {exc.message}") from None
        except ValidationError as exc:
            raise ServerFailure(
                "protocol", f"{what} answered what MCP does not allow: {str(exc)[:300]}"
            ) from None
        except (OSError, EOFError, RuntimeError) as exc:
            self.broken = f"the connection failed during {what}: {_describe(exc)}{self._stderr_tail()}"
            raise ServerFailure("crashed", self.broken) from None

    def _stderr_tail(self, chars: int = 400) -> str:
        if self.errlog is None or not self.errlog.exists():
            return ""
        with open(self.errlog, "rb") as log:
            log.seek(0, 2)
            log.seek(max(0, log.tell() - chars))
            tail = log.read().decode(errors="replace").strip()
        return f" (the server's stderr ends: {tail!r})" if tail else ""


def _describe(exc: BaseException) -> str:
    """An exception in one line; an exception group by its first leaf (anyio wraps task errors)."""
    while isinstance(getattr(exc, "exceptions", None), tuple) and exc.exceptions:  # type: ignore[attr-defined]
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return f"{type(exc).__name__}: {str(exc)[:300]}"


def blocking(connection_call: Callable[[], Awaitable[T]], timeout_s: float) -> T:
    """Run one of a connection's coroutines from synchronous code, on the process's loop."""
    return event_loop().run(connection_call(), timeout_s)
