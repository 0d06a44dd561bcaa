"""The MCP server of one episode, through the official `mcp` SDK's low-level `Server`.

What a client finds: the env's tools (`tools/list`), the task as the prompt `task` and the resource
`agentrl://episode/task`, and where the episode stands as the resource `agentrl://episode` (JSON:
steps, reward, terminated, truncated, done). The result of the call that ends the episode says so,
with the reward, and every later call is refused with the same words.

Two transports: stdio (one client, the process that started the server) and streamable HTTP at
`/mcp`, which, like `agentrl serve`, binds loopback unless a bearer token is set, and then refuses
every request without it.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from agentrl.server.config import is_loopback
from agentrl.server.mcp.episode import ServedEpisode

STATUS_URI = "agentrl://episode"
TASK_URI = "agentrl://episode/task"
TASK_PROMPT = "task"
HTTP_PATH = "/mcp"


def build_server(episode: ServedEpisode) -> Server[Any]:
    """The SDK server whose handlers play `episode`."""
    tools = [types.Tool(name=spec["function"]["name"], description=spec["function"].get("description"),
                        input_schema=spec["function"].get("parameters") or {"type": "object"})
             for spec in episode.tools]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        result = await anyio.to_thread.run_sync(episode.call, params.name, params.arguments or {})
        content: list[types.ContentBlock] = [types.TextContent(type="text", text=result.text)]
        if result.ended:
            content.append(types.TextContent(type="text", text=f"{episode.status.summary()} "
                                             f"The status is the resource {STATUS_URI}."))
        return types.CallToolResult(content=content, is_error=result.is_error)

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(
            name=TASK_PROMPT, description=f"The task of this {episode.env_id} episode.")])

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name != TASK_PROMPT:
            raise ValueError(f"unknown prompt {params.name!r}; this server has {TASK_PROMPT!r}")
        return types.GetPromptResult(messages=[types.PromptMessage(
            role="user", content=types.TextContent(type="text", text=episode.task))])

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[
            types.Resource(name="task", uri=TASK_URI, mime_type="text/plain",
                           description="The task: the episode's first observation."),
            types.Resource(name="episode", uri=STATUS_URI, mime_type="application/json",
                           description="Steps, reward and end flags of the episode so far."),
        ])

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == TASK_URI:
            text, mime = episode.task, "text/plain"
        elif uri == STATUS_URI:
            text, mime = json.dumps(episode.status.as_json()), "application/json"
        else:
            raise ValueError(f"unknown resource {uri!r}; this server has {TASK_URI} and {STATUS_URI}")
        contents: list[types.TextResourceContents | types.BlobResourceContents] = [
            types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
        return types.ReadResourceResult(contents=contents)

    return Server(
        f"agentrl {episode.env_id}",
        instructions=(f"One episode of the agentrl env {episode.env_id}: the prompt {TASK_PROMPT!r} (or the "
                      f"resource {TASK_URI}) is the task; each tool call is one step; the resource "
                      f"{STATUS_URI} holds the reward once the episode ends."),
        on_list_tools=list_tools, on_call_tool=call_tool, on_list_prompts=list_prompts,
        on_get_prompt=get_prompt, on_list_resources=list_resources, on_read_resource=read_resource,
    )


async def serve_stdio(episode: ServedEpisode) -> None:
    """Serve the episode on this process's stdin and stdout until the client closes them."""
    from mcp.server.stdio import stdio_server

    server = build_server(episode)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


class BearerGate:
    """Refuses, with 401, every HTTP request that does not bear the token (all of them: the MCP
    endpoint is the whole app)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token = app, token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            scheme, _, value = given.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(value.strip(), self.token):
                response = JSONResponse({"error": "unauthorized", "message": "missing or wrong bearer token"},
                                        status_code=401, headers={"WWW-Authenticate": "Bearer"})
                return await response(scope, receive, send)
        await self.app(scope, receive, send)


def http_app(episode: ServedEpisode, *, host: str, token: str | None) -> ASGIApp:
    """The streamable-HTTP app at `/mcp`; refuses a non-loopback `host` without a token, as
    `agentrl serve` does."""
    if not is_loopback(host) and not token:  # `token` is the one in force: no variable read here
        raise ValueError(f"binding to non-loopback host {host!r} requires a token")
    app = build_server(episode).streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
    return BearerGate(app, token) if token else app


def serve_http(episode: ServedEpisode, *, host: str, port: int, token: str | None,
               log_level: str = "warning") -> None:
    """Serve the episode over streamable HTTP in the foreground, under the servers' uvicorn config."""
    from agentrl.serving.runner import run_server

    run_server(http_app(episode, host=host, token=token), host=host, port=port, log_level=log_level)
