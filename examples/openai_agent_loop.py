"""The minimal OpenAI-tools agent loop, against Bash-v0 served by `agentrl serve`.

Two tools (execute_bash, read_file); the model's first reply without a tool call is its final
answer. Works with any OpenAI-compatible chat-completions endpoint (vLLM, llama.cpp, OpenAI...):

    agentrl serve --port 8000 &
    python examples/openai_agent_loop.py --env-url http://127.0.0.1:8000 \
        --llm-url http://127.0.0.1:8001/v1 --model Qwen/Qwen2.5-7B-Instruct
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import gymnasium as gym
import httpx

import agentrl  # noqa: F401  (registers the env ids)

TOOLS = ("execute_bash", "read_file")
SYSTEM = (
    "You are working in a Linux shell to solve a task. Use the tools to look around and act. "
    "When you are done, reply with your final answer only, without calling a tool."
)


def tool_result(observation: str) -> str:
    """The text inside the env's <tool_response>, as the chat API's tool message wants it."""
    body = observation.partition("<tool_response>")[2].rpartition("</tool_response>")[0].strip()
    try:
        payload = json.loads(body)
    except json.JSONDecodeError:
        return observation
    return str(payload.get("content", payload.get("error", "")))


def chat(llm: httpx.Client, model: str, messages: list[dict[str, Any]], tools: list[dict]) -> dict[str, Any]:
    response = llm.post("/chat/completions", json={"model": model, "messages": messages, "tools": tools})
    response.raise_for_status()
    return response.json()["choices"][0]["message"]


def run_episode(
    llm: httpx.Client,
    model: str,
    env: gym.Env,
    *,
    seed: int | None = None,
    options: dict[str, Any] | None = None,
    max_turns: int = 20,
) -> tuple[float, dict[str, Any], list[dict[str, Any]]]:
    """Play one episode; return the reward, the last info and the chat transcript."""
    observation, info = env.reset(seed=seed, options=options)
    task = observation.split("\n\n# Tools", 1)[0]  # the env also lists tools in text; the API gets them typed
    tools = [spec for spec in info["tools"] if spec["function"]["name"] in TOOLS]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": task},
    ]
    for _ in range(max_turns):
        message = chat(llm, model, messages, tools)
        messages.append({k: v for k, v in message.items() if v is not None})
        calls = message.get("tool_calls") or []
        if not calls:  # a reply without tools is the final answer
            action = json.dumps({"name": "finish", "arguments": {"answer": message.get("content") or ""}})
            _, reward, _, _, info = env.step(f"<tool_call>{action}</tool_call>")
            return reward, info, messages
        for tool_call in calls:
            function = tool_call["function"]
            action = json.dumps({"name": function["name"], "arguments": function.get("arguments") or "{}"})
            observation, reward, terminated, truncated, info = env.step(f"<tool_call>{action}</tool_call>")
            messages.append(
                {"role": "tool", "tool_call_id": tool_call["id"], "content": tool_result(observation)}
            )
            if terminated or truncated:
                return reward, info, messages
    return 0.0, info, messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-url", default="http://127.0.0.1:8000", help="the agentrl server")
    parser.add_argument(
        "--llm-url", required=True, help="OpenAI-compatible base URL, e.g. http://host:port/v1"
    )
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY", "none"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--family", help="a task family, e.g. log_errors; default: chosen by the seed")
    parser.add_argument("--max-turns", type=int, default=20)
    args = parser.parse_args()
    options = {"family": args.family} if args.family else None
    env = gym.make("agentrl/Bash-v0", base_url=args.env_url)
    headers = {"Authorization": f"Bearer {args.api_key}"}
    with httpx.Client(base_url=args.llm_url, headers=headers, timeout=300.0) as llm:
        try:
            reward, info, messages = run_episode(
                llm, args.model, env, seed=args.seed, options=options, max_turns=args.max_turns
            )
        finally:
            env.close()
    for message in messages:
        print(f"[{message['role']}] {message.get('content') or message.get('tool_calls')}")
    print(f"reward={reward} task={info.get('task_id')} solved={info.get('solved')}")


if __name__ == "__main__":
    main()
