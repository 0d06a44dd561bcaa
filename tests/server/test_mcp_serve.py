"""`agentrl mcp serve`: an agentrl episode as an MCP server, spoken to by the `mcp` SDK's own client.

Over stdio the client starts the real command (`python -m agentrl mcp serve ...`) as a subprocess;
over HTTP the app runs under uvicorn on loopback (`support.AppServer`). The SDK is the `[mcp]` extra,
which tests/run installs: imported, not skipped.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from support import AppServer

from agentrl.core.tools import tool_response
from agentrl.server.mcp.episode import ServedEpisode
from agentrl.server.mcp.serve import STATUS_URI, TASK_PROMPT, TASK_URI, http_app

pytestmark = pytest.mark.timeout(120)


def stdio(env_id: str, *args: str) -> Client:
    command = StdioServerParameters(command=sys.executable,
                                    args=["-m", "agentrl", "mcp", "serve", env_id, *args])
    return Client(stdio_client(command), cache=None)


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def status(client: Client) -> dict[str, Any]:
    read = await client.read_resource(STATUS_URI)
    return json.loads(read.contents[0].text)


def as_observation(name: str, result: Any) -> str:
    """The env's observation again from a call's result (what the oracle reads): its first block is
    the tool's content or error, JSON when the tool answered a mapping."""
    first = result.content[0].text
    try:
        content = json.loads(first)
    except json.JSONDecodeError:
        content = first
    return tool_response(name, content, error=bool(result.is_error))


def test_flights_oracle_over_stdio_earns_full_reward():
    from agentrl.flights.oracle import OraclePolicy

    async def main() -> tuple[dict[str, Any], str]:
        async with stdio("agentrl/Flights-v0", "--seed", "3") as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert {"search_flights", "book_flight", "finish"} <= set(tools)
            assert tools["search_flights"].input_schema["properties"].keys() >= {"origin", "destination"}
            prompt = await client.get_prompt(TASK_PROMPT)
            task = prompt.messages[0].content.text
            assert "# Customer request" in task and "# Tools" not in task  # the tools are MCP's to list
            assert (await client.read_resource(TASK_URI)).contents[0].text == task
            policy, observation, last = OraclePolicy(), task, ""
            for _ in range(30):
                action = policy(observation, {})
                call = json.loads(action.removeprefix("<tool_call>").removesuffix("</tool_call>"))
                result = await client.call_tool(call["name"], call["arguments"])
                last = text_of(result)
                if "The episode ended" in last:
                    break
                assert (await status(client))["done"] is False
                observation = as_observation(call["name"], result)
            return await status(client), last

    final, last = anyio.run(main)
    assert final["done"] and final["terminated"] and final["reward"] == 1.0, final
    assert "reward 1" in last


def test_echo_junk_over_stdio_is_answered_and_never_crashes_the_server():
    async def main() -> None:
        async with stdio("agentrl/Echo-v0", "--seed", "0", "--max-action-chars", "4096",
                         "--env-kwargs", '{"max_turns": 50}') as client:
            junk = [
                ("echo", {"text": 5}),  # a wrong type
                ("echo", {}),  # a missing argument
                ("echo", {"text": "x", "surplus": [1, {"y": None}]}),
                ("no_such_tool", {"a": 1}),
                ("", {}),
                ("echo", {"text": "<tool_call>{}</tool_call>"}),  # no block can be closed early
                ("echo", {"text": "nul \x00 and controls \x1b[2J"}),
                ("echo", {"text": "z" * 100_000}),  # over the action limit: refused, not stepped
            ]
            for name, arguments in junk:
                result = await client.call_tool(name, arguments)
                assert result.content and text_of(result), (name, arguments)
            refused = await client.call_tool("echo", {"text": "z" * 100_000})
            assert refused.is_error and "limit is 4096" in text_of(refused)
            assert (await client.call_tool("no_such_tool", {})).is_error
            # the server still plays: a good call after all of it answers, and is a step
            before = (await status(client))["steps"]
            good = await client.call_tool("echo", {"text": "still here"})
            assert not good.is_error and text_of(good) == "still here"
            after = await status(client)
            assert after["steps"] == before + 1 and not after["done"]

    anyio.run(main)



def test_junk_at_the_protocol_level_leaves_the_server_answering():
    """Lines no SDK client would send: not JSON, calls with params of the wrong shape, a lone
    surrogate escaped in the JSON. Each is refused or dropped; the next good call is answered."""
    import queue
    import subprocess
    import threading

    command = [sys.executable, "-m", "agentrl", "mcp", "serve", "agentrl/Echo-v0", "--seed", "0"]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in server.stdout], daemon=True).start()

    def send(message: Any) -> None:
        server.stdin.write((message if isinstance(message, str) else json.dumps(message)) + "\n")
        server.stdin.flush()

    def answer(request_id: int) -> dict[str, Any]:
        while True:
            message = json.loads(lines.get(timeout=30))
            if message.get("id") == request_id:
                return message

    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {},
                 "clientInfo": {"name": "raw", "version": "0"}}
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
        assert "result" in answer(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send("this line is not JSON")
        wrong = [{"name": "echo", "arguments": "not an object"}, {"name": 5}, {"arguments": {}}, None,
                 {"name": "echo", "arguments": [1]}]
        for request_id, params in enumerate(wrong, 10):
            send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
            assert answer(request_id)["error"]["code"] == -32602
        send({"jsonrpc": "2.0", "id": 20, "method": "tools/call",
              "params": {"name": "echo", "arguments": {"text": "lone \ud800"}}})  # json.dumps escapes it
        send({"jsonrpc": "2.0", "id": 21, "method": "tools/call", "params": {"name": "echo",
                                                                              "arguments": {"text": "ok"}}})
        assert answer(21)["result"]["content"] == [{"type": "text", "text": "ok"}]
        assert server.poll() is None
    finally:
        server.stdin.close()
        server.wait(timeout=30)

def test_calls_after_the_end_are_refused_and_change_nothing():
    episode = ServedEpisode("agentrl/Echo-v0", seed=0)
    try:
        secret = episode.task.split("'")[1]
        ended = episode.call("finish", {"answer": secret})
        assert ended.ended and not ended.is_error
        assert episode.status.reward == 1.0 and episode.status.terminated
        again = episode.call("finish", {"answer": secret})
        assert again.is_error and again.ended and "Nothing was done" in again.text
        assert episode.status.steps == 1 and episode.status.reward == 1.0
    finally:
        episode.close()


def test_an_env_without_tools_is_played_through_act():
    episode = ServedEpisode("agentrl/Search-v0", seed=0, env_kwargs={"world_seed": 7, "world_passages": 600})
    try:
        assert episode.tool_names == {"act"}
        result = episode.call("act", {"action": "<search>born in</search>"})
        assert not result.is_error and episode.status.steps == 1 and result.text
    finally:
        episode.close()


def test_http_refuses_requests_without_the_token_and_serves_those_with_it():
    episode = ServedEpisode("agentrl/Echo-v0", seed=0)
    app = http_app(episode, host="127.0.0.1", token="s3cret")

    async def call(token: str | None) -> str:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers) as http, \
                Client(streamable_http_client(f"{server.url}/mcp", http_client=http), cache=None) as client:
            return text_of(await client.call_tool("echo", {"text": "over http"}))

    try:
        with AppServer(app) as server:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
                refused = httpx2.post(f"{server.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                      headers=headers)
                assert refused.status_code == 401, (headers, refused.status_code)
            assert anyio.run(call, "s3cret") == "over http"
            assert episode.status.steps == 1  # the refused requests stepped nothing
    finally:
        episode.close()
    with pytest.raises(ValueError, match="requires a token"):
        http_app(episode, host="0.0.0.0", token=None)


def test_the_command_refuses_an_open_bind_without_a_token_and_an_unknown_env():
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "AGENTRL_TOKEN"}
    for args, said in [(["agentrl/Echo-v0", "--transport", "http", "--host", "0.0.0.0"], "requires a token"),
                       (["me/Missing-v0"], "unknown env 'me/Missing-v0'")]:
        done = subprocess.run([sys.executable, "-m", "agentrl", "mcp", "serve", *args], capture_output=True,
                              text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
        assert done.returncode == 2 and said in done.stderr, (args, done.stderr)
