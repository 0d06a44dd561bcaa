"""The in-container bridge of sandbox isolation: a process inside the sandbox that holds the SDK's
`ClientSession` to the episode's stdio server and answers the env's requests on the container's own
loopback (which nothing outside the container reaches; the sandbox has no network).

The env reaches it through the sandbox's relay (`Sandbox.relay`, `reply_ends="line"`): the sandbox's own
agent sends one JSON line to `PORT` and reads the bridge's one-line answer, keeping its connection for
the next request; no command runs, so a request costs a round trip to the agent. The bridge renders
results there (`agentrl.mcp.rendering`, whose source travels with this one's), so a huge answer is
clipped before it leaves the container. It is started by an exec that keeps it alive, with its code
on the command line (no file for the agent to edit), and it runs under the container's own Python and
MCP SDK: it uses only what the SDK's 1.x and 2.x share (`stdio_client`, `ClientSession`,
`initialize`, `list_tools`, `call_tool`).

Requests: {"op": "list", "limit": n} and {"op": "call", "name", "arguments", "timeout_s", "limit"}.
Answers: {"tools": [...], "more": bool}, {"text": str, "is_error": bool, "junk": [count, lines]}, or
{"failure": kind, "message": str} with the kinds of `agentrl.mcp.client.ServerFailure`. After a timeout
or a crash the bridge exits: the episode is over, and its sandbox is closed.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from agentrl.mcp.rendering import junk_line, render_result  # in the container: the renderer's source, here

PORT = 47231
HOME = "/tmp/.agentrl-mcp"
READY = f"{HOME}/ready"
STDERR = f"{HOME}/server.stderr"
MAX_REQUEST = 1 << 24  # a longer request line is dropped unanswered


RENDERING_IMPORT = "from agentrl.mcp.rendering import junk_line, render_result"


def source() -> str:
    """The bridge's program: this module, with the renderer's source in place of its import (the
    container has the MCP SDK, not agentrl)."""
    here = Path(__file__).parent
    rendering = (here / "rendering.py").read_text().replace("from __future__ import annotations\n", "")
    text = Path(__file__).read_text()
    assert RENDERING_IMPORT in text
    return text.replace(RENDERING_IMPORT, rendering, 1)


def _page(session: Any, cursor: str | None) -> dict[str, Any]:
    """`list_tools`'s arguments for a page: SDK 2.x takes `params`, 1.x a `cursor`."""
    if cursor is None:
        return {}
    if "params" in inspect.signature(session.list_tools).parameters:
        from mcp.types import PaginatedRequestParams

        return {"params": PaginatedRequestParams(cursor=cursor)}
    return {"cursor": cursor}


class _Bridge:
    """One episode's bridge: the SDK session to its server, the junk the server printed since the last
    answer, and `done`, set by a failure: the episode is over and the bridge exits once it answered."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.junk: list[Any] = [0, []]
        self.done = asyncio.Event()

    async def on_message(self, message: Any) -> None:
        """The SDK's message handler: a line the server printed that is not JSON-RPC is junk."""
        if isinstance(message, Exception):
            self.junk[0] += 1
            if len(self.junk[1]) < 3:
                self.junk[1].append(junk_line(message))

    def failure(self, kind: str, message: str) -> dict[str, Any]:
        """A failure's answer, the end of the server's stderr in its message; the bridge then exits."""
        self.done.set()
        with open(STDERR, "rb") as log:
            log.seek(0, 2)
            log.seek(max(0, log.tell() - 400))
            tail = log.read().decode(errors="replace").strip()
        return {
            "failure": kind,
            "message": message + (f" (the server's stderr ends: {tail!r})" if tail else ""),
        }

    async def list_tools(self, limit: int) -> dict[str, Any]:
        tools, cursor = [], None
        for _ in range(64):
            page = await asyncio.wait_for(self.session.list_tools(**_page(self.session, cursor)), 60)
            tools += [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools]
            cursor = getattr(page, "next_cursor", getattr(page, "nextCursor", None))
            if cursor is None or len(tools) >= limit:
                break
        return {"tools": tools[:limit], "more": len(tools) > limit or bool(cursor)}

    async def call_tool(self, request: dict[str, Any]) -> dict[str, Any]:
        result = await asyncio.wait_for(
            self.session.call_tool(request["name"], request["arguments"]), request["timeout_s"]
        )
        dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        taken, self.junk[:] = list(self.junk), [0, []]
        return {
            "text": render_result(dumped, request["limit"]),
            "is_error": bool(dumped.get("isError")),
            "junk": taken,
        }

    async def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """A request's answer: what the server answered, or the failure that ended the episode."""
        try:
            if request["op"] == "list":
                return await self.list_tools(request["limit"])
            return await self.call_tool(request)
        except asyncio.TimeoutError:
            return self.failure(
                "timeout", f"no answer within {request.get('timeout_s', 60)} s; the server was stopped"
            )
        except Exception as exc:
            text = str(getattr(exc, "message", "") or exc)[:300]
            if "closed" in text.lower() or isinstance(exc, (OSError, EOFError)):
                return self.failure("crashed", f"the server went away: {type(exc).__name__}: {text}")
            return {"failure": "protocol", "message": f"{type(exc).__name__}: {text}"}

    async def handle(self, conn: socket.socket) -> None:
        """Each line of the connection is a request, answered with one line, until the other end
        closes it: the sandbox's agent keeps the connection between relays (`reply_ends` "line"), so
        a request costs no connect and no accept. The event loop's socket calls, not streams: fewer
        turns of the loop per request."""
        loop = asyncio.get_running_loop()
        with conn:
            pending = bytearray()
            while True:
                while b"\n" not in pending:
                    chunk = await loop.sock_recv(conn, 1 << 16)
                    pending += chunk
                    if not chunk or len(pending) > MAX_REQUEST:
                        return
                request, _, rest = bytes(pending).partition(b"\n")
                pending[:] = rest
                reply = await self.answer(json.loads(request))
                await loop.sock_sendall(conn, json.dumps(reply).encode() + b"\n")

    async def accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        handling: set[asyncio.Task[None]] = set()
        while True:
            conn, _ = await loop.sock_accept(listener)
            task = loop.create_task(self.handle(conn))
            handling.add(task)  # held until it is done: the loop keeps only weak references
            task.add_done_callback(handling.discard)


async def _serve(port: int, ready: str, argv: list[str]) -> None:
    """Start the episode's server, then answer requests on `port` until a failure ends the episode
    (the sandbox's end stops the bridge otherwise); `ready` is created once requests are taken."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    bridge = _Bridge(None)
    errlog = open(STDERR, "a")  # noqa: SIM115  # the server's stderr for the bridge's whole life
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=os.getcwd(), env=dict(os.environ))
    async with (
        stdio_client(params, errlog) as streams,
        ClientSession(streams[0], streams[1], message_handler=bridge.on_message) as session,
    ):
        await session.initialize()
        bridge.session = session
        bridge.junk[:] = [0, []]  # a banner before the handshake is nothing an episode did
        with socket.socket() as listener:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", port))
            listener.listen(64)
            listener.setblocking(False)
            open(ready, "x").close()
            accepting = asyncio.get_running_loop().create_task(bridge.accept(listener))
            await bridge.done.wait()
            await asyncio.sleep(0.2)  # the failure's answer leaves first
            accepting.cancel()


if __name__ == "__main__":
    os.makedirs(HOME, exist_ok=True)
    asyncio.run(_serve(int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])))
    os._exit(0)  # a server that hung is left to the sandbox's end, not waited for
