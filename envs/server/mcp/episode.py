"""One episode of an agentrl env, played by MCP tool calls: what `agentrl mcp serve` serves.

The env's tools are the server's tools (their schemas are the reset's `info["tools"]`); each tool
call is one step of the episode, its action the call as one `<tool_call>` block, and the env's
answer to it is the call's result. An env without tools (one that reads tags, such as Search-v0) is
offered one tool, `act`, whose `action` is the step's text as it is. Everything about turning calls
into actions and observations into results is `agentrl.core.tool_calls`: the same conversions a
chat API's native tool calls go through.

A call that cannot be a step (an action over the size limit, a call after the end) is an error
result and leaves the episode as it was; a wrong call the env can read (an unknown tool, arguments
that do not fit) is a step the env answers with its error, as it answers such text. Nothing a client
sends raises here: an env that raises is logged, reported in the result, and ends the episode.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentrl.core.tool_calls import task_text, tool_calls_action, tool_messages
from agentrl.registration import make_env

logger = logging.getLogger("agentrl.server.mcp")

# the tool of an env that has none: its action is the text given
ACT_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "act",
        "description": "Take one step of the episode: the text is the action, as the task describes it.",
        "parameters": {"type": "object", "properties": {"action": {"type": "string",
                                                                   "description": "The action's text."}},
                       "required": ["action"]},
    },
}
CALL_ID = "mcp"  # the one call of each step (`tool_messages` answers calls by id)


@dataclass
class CallResult:
    """What a tool call gives the client: the text, whether it is an error, and whether the episode
    ended with it."""

    text: str
    is_error: bool = False
    ended: bool = False


@dataclass
class EpisodeStatus:
    """Where the episode stands, as the client reads it (the resource `agentrl://episode`)."""

    env_id: str
    seed: int | None
    steps: int = 0
    reward: float = 0.0  # the sum of every step's reward
    terminated: bool = False
    truncated: bool = False
    failure: str | None = None  # why the env stopped answering, when it raised

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated or self.failure is not None

    def as_json(self) -> dict[str, Any]:
        return {"env_id": self.env_id, "seed": self.seed, "steps": self.steps, "reward": self.reward,
                "terminated": self.terminated, "truncated": self.truncated, "done": self.done,
                "failure": self.failure}

    def summary(self) -> str:
        how = ("ended: the env failed" if self.failure else "ended (terminated)" if self.terminated
               else "ended (truncated)")
        steps = f"{self.steps} step" + ("" if self.steps == 1 else "s")
        return f"The episode {how} after {steps} with reward {self.reward:g}."


@dataclass
class ServedEpisode:
    """An env reset once, stepped by tool calls until it ends (one episode per server).

    Calls are stepped one at a time, in the order they arrive, each in the calling thread; the
    server runs them in a worker thread, since env steps block.
    """

    env_id: str
    seed: int | None = None
    options: Mapping[str, Any] | None = None
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    max_action_chars: int = 65_536

    def __post_init__(self) -> None:
        self.env = make_env(self.env_id, **self.env_kwargs)
        observation, info = self.env.reset(seed=self.seed, options=dict(self.options or {}))
        self.tools: list[dict[str, Any]] = list(info.get("tools") or [])
        self.text_actions = not self.tools  # the env reads text: its one tool is `act`
        if self.text_actions:
            self.tools = [ACT_TOOL]
        self.task = task_text(observation)
        self.status = EpisodeStatus(self.env_id, self.seed)
        self._lock = threading.Lock()

    @property
    def tool_names(self) -> set[str]:
        return {spec["function"]["name"] for spec in self.tools}

    def call(self, name: str, arguments: Any) -> CallResult:
        """Step the episode with one tool call; never raises for anything a client sends."""
        with self._lock:
            if self.status.done:
                return CallResult(f"Nothing was done: {self.status.summary()}", is_error=True, ended=True)
            calls = [{"id": CALL_ID, "type": "function", "function": {"name": name, "arguments": arguments}}]
            action = self._action(calls, arguments)
            if len(action) > self.max_action_chars:
                return CallResult(f"Nothing was done: the call is {len(action)} characters as an action; "
                                  f"the limit is {self.max_action_chars}.", is_error=True)
            try:
                observation, reward, terminated, truncated, _ = self.env.step(action)
            except Exception as exc:  # the env's fault, not the client's: said loudly, and the end
                logger.exception("%s raised on step %d", self.env_id, self.status.steps + 1)
                self.status.failure = f"{type(exc).__name__}: {exc}"
                return CallResult(f"The env failed on this call ({self.status.failure}). "
                                  f"{self.status.summary()}", is_error=True, ended=True)
            status = self.status
            status.steps += 1
            status.reward += float(reward)
            status.terminated, status.truncated = bool(terminated), bool(truncated)
            text, is_error = (observation, False) if self.text_actions else result_text(calls, observation)
            return CallResult(text, is_error, ended=status.done)

    def _action(self, calls: list[dict[str, Any]], arguments: Any) -> str:
        if not self.text_actions:
            return tool_calls_action(calls)
        given = arguments.get("action") if isinstance(arguments, Mapping) else None
        return given if isinstance(given, str) else tool_calls_action(calls)  # the env says what is wrong

    def close(self) -> None:
        self.env.close()


def result_text(calls: list[dict[str, Any]], observation: str) -> tuple[str, bool]:
    """The result of the one call the observation answers: the tool's content, or its error (then
    True); an observation that is not that call's `<tool_response>` alone is given whole."""
    body = tool_messages(calls, observation)[0]["content"]
    try:
        payload = json.loads(body)
    except json.JSONDecodeError:
        return observation, False
    if not isinstance(payload, dict) or not ({"content", "error"} & payload.keys()):
        return observation, False
    is_error = "error" in payload
    value = payload["error" if is_error else "content"]
    return (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)), is_error
