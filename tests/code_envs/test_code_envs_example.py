"""The example agent loop against Bash-v0 through the HTTP server, with a scripted stand-in policy
served as an OpenAI-compatible chat-completions endpoint on loopback."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import httpx
import pytest
from fastapi import FastAPI, Request
from support import AppServer

from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread

pytestmark = pytest.mark.docker
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "openai_agent_loop.py"


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("openai_agent_loop", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def scripted_policy(requests: list[dict[str, Any]]) -> FastAPI:
    """Count files the way a model would: one shell call, then answer from the tool's output."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> dict[str, Any]:
        body = await request.json()
        requests.append({"body": body, "auth": request.headers.get("authorization")})
        messages = body["messages"]
        if messages[-1]["role"] == "user":
            ext, size, root = re.search(
                r"extension \.(\w+) that are larger than (\d+) bytes .* directory (\S+)/",
                messages[-1]["content"],
            ).groups()
            arguments = json.dumps({"command": f"find {root} -type f -name '*.{ext}' -size +{size}c | wc -l"})
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "execute_bash", "arguments": arguments},
                    }
                ],
            }
        else:
            output = json.loads(messages[-1]["content"])["content"]  # the tool message's result body
            message = {"role": "assistant", "content": output.split()[-1]}
        return {
            "id": "x",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }

    return app


def test_agent_loop_solves_a_task_through_the_server(docker_backend):
    example = load_example()
    requests: list[dict[str, Any]] = []
    with (
        AppServer(scripted_policy(requests)) as policy,
        serve_in_thread(ServerConfig()) as env_url,
        httpx.Client(base_url=f"{policy.url}/v1", headers={"Authorization": "Bearer k"}) as llm,
    ):
        env = gym.make("agentrl/Bash-v0", base_url=env_url, pool_size=4)
        try:
            reward, info, messages = example.run_episode(
                llm, "stand-in", env, seed=6, options={"family": "count_files"}
            )
        finally:
            env.close()
    assert reward == 1.0 and info["solved"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    first = requests[0]["body"]
    assert [t["function"]["name"] for t in first["tools"]] == ["execute_bash", "read_file"]
    assert requests[0]["auth"] == "Bearer k" and first["model"] == "stand-in"
    assert "# Tools" not in first["messages"][1]["content"]
    assert messages[3]["tool_call_id"] == "call_1"
    assert json.loads(messages[3]["content"])["content"].startswith("[exit code 0]")
