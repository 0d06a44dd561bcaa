"""The minimal OpenAI-tools agent loop, against Bash-v0 served by `agentrl serve`.

Two tools (execute_bash, read_file); the model's first reply without a tool call is its final
answer. The episode is played by agentrl's episode driver (`agentrl.driver.play`), with the model
behind a policy (`ChatPolicy`). Works with any OpenAI-compatible chat-completions endpoint
(vLLM, llama.cpp, OpenAI...):

    agentrl serve --port 8000 &
    python examples/openai_agent_loop.py --env-url http://127.0.0.1:8000 \
        --llm-url http://127.0.0.1:8001/v1 --model Qwen/Qwen2.5-7B-Instruct
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import gymnasium as gym
import httpx

import agentrl  # noqa: F401  (registers the env ids)
from agentrl.core import tool_call
from agentrl.core.tool_calls import task_text, tool_calls_action, tool_messages
from agentrl.driver import Episode, play

TOOLS = ("execute_bash", "read_file")
SYSTEM = (
    "You are working in a Linux shell to solve a task. Use the tools to look around and act. "
    "When you are done, reply with your final answer only, without calling a tool."
)


def chat(llm: httpx.Client, model: str, messages: list[dict[str, Any]], tools: list[dict]) -> dict[str, Any]:
    response = llm.post("/chat/completions", json={"model": model, "messages": messages, "tools": tools})
    response.raise_for_status()
    return response.json()["choices"][0]["message"]


class ChatPolicy:
    """The chat model as the episode driver's policy: each reply's tool calls are one env step, and
    a reply without a tool call is its final answer, sent as `finish`. `messages` is the chat the
    model saw; the tool listing goes to the API typed, so the task text goes without it, and the
    env's results come back as one tool message per call (`agentrl.core.tool_calls`)."""

    def __init__(self, llm: httpx.Client, model: str, max_turns: int) -> None:
        self.llm, self.model, self.max_turns = llm, model, max_turns
        self.messages: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []  # the tool calls the next observation answers
        self.asked = 0

    def __call__(self, observation: str, info: dict[str, Any]) -> str | None:
        if not self.messages:  # the task
            self.tools = [spec for spec in info["tools"] if spec["function"]["name"] in TOOLS]
            task = task_text(observation)
            self.messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]
        else:
            self.observe(observation)
        if self.asked == self.max_turns:
            return None
        self.asked += 1
        message = chat(self.llm, self.model, self.messages, self.tools)
        self.messages.append({k: v for k, v in message.items() if v is not None})
        self.calls = list(message.get("tool_calls") or [])
        if not self.calls:  # a reply without tools is the final answer
            return tool_call("finish", answer=message.get("content") or "")
        return tool_calls_action(self.calls)

    def observe(self, observation: str) -> None:
        """The results of the last reply's tool calls, as the chat API's tool messages."""
        self.messages += tool_messages(self.calls, observation)
        self.calls = []


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
    policy = ChatPolicy(llm, model, max_turns)
    outcome = play(Episode(env), policy, seed, options)
    policy.observe(outcome.last_observation)  # the episode may end on a tool call
    return outcome.reward, outcome.last_info, policy.messages


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
