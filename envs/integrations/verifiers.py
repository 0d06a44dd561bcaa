"""agentrl envs for verifiers' v1 API (`verifiers.v1`, what prime-rl trains with).

The env plays the user, as verifiers' own OpenEnv and TextArena tasksets do: `AgentrlEnv.run` opens
the episode, sends its first observation as the user turn, steps the agentrl env with each reply,
sends the next observation back, and records the env's total reward on the trace (`agentrl_reward`)
when the env ends the episode. The episode is deleted on the server whatever happens.

verifiers finds a taskset by its top-level module, so the taskset id is `agentrl-verifiers` (the
`agentrl_verifiers` package re-exports this module):

    vf-eval agentrl-verifiers --env.taskset.env-id agentrl/Flights-v0 \\
        --env.taskset.base-url http://127.0.0.1:8000 --model ... -n 8

`AgentrlChatHarness` is the taskset's default harness: one chat completion per turn, in-process,
through the rollout's interception endpoint. agentrl actions are raw text (tool calls inside the
reply), so the model needs no tool API, no sandbox and no program to install. With the taskset's
`native_tools` the env's tools go to the server typed, as OpenAI `tools`, and the first observation
goes without its tool listing. Either way a reply's `tool_calls` are its action (one `<tool_call>`
each, `agentrl.core.tool_calls`) and their results go back as `role: tool` messages; a reply with
no `tool_calls` is the action as it is.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, Literal

import httpx
import verifiers.v1 as vf
from pydantic import Field

from agentrl.core.tool_calls import task_text, tool_calls_action, tool_messages
from agentrl.integrations.episode import AsyncRowEpisode, EnvSource
from agentrl.registration import ENV_IDS

REWARD_NAME = "agentrl_reward"
# the trace's info key of the tools a `native_tools` episode offers, read by the harness
TOOLS_KEY = "agentrl_tools"


class AgentrlTaskData(vf.TaskData):
    """One agentrl episode: which env, where it is served, and the seed, split and options."""

    agentrl_env: str
    base_url: str | None = None
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    seed: int
    split: Literal["train", "test"] | None = "train"
    options: dict[str, Any] = Field(default_factory=dict)
    native_tools: bool = False

    def row(self) -> dict[str, Any]:
        return {"seed": self.seed, "split": self.split, "options": self.options}


class AgentrlTask(vf.Task[AgentrlTaskData]):
    pass


class AgentrlTasksetConfig(vf.TasksetConfig):
    env_id: str = "agentrl/Flights-v0"
    """The agentrl env id."""
    base_url: str | None = None
    """An `agentrl serve` server; unset runs the env in the eval process."""
    token_var: str | None = None
    """Environment variable holding the server's bearer token."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Constructor arguments of the env (a server takes those a client may pass)."""
    split: Literal["train", "test"] | None = "train"
    first_seed: int = Field(0, ge=0)
    num_tasks: int = Field(1000, ge=1)
    """Tasks are seeds first_seed .. first_seed + num_tasks - 1."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Reset options of every task (for Flights-v0: `family`, `level`)."""
    native_tools: bool = False
    """Offer the env's tools as the request's OpenAI `tools` (the server must parse tool calls, e.g.
    vLLM's `--enable-auto-tool-choice --tool-call-parser ...`) and send the first observation without
    its tool listing; off, the observation lists the tools and the model writes `<tool_call>` text."""


class AgentrlTaskset(vf.Taskset[AgentrlTask, AgentrlTasksetConfig]):
    def load(self) -> Iterator[AgentrlTask]:
        config = self.config
        if config.env_id not in ENV_IDS:
            raise ValueError(f"unknown agentrl env {config.env_id!r}; known: {ENV_IDS}")
        for seed in range(config.first_seed, config.first_seed + config.num_tasks):
            yield AgentrlTask(
                AgentrlTaskData(  # pyright: ignore[reportCallIssue]  # a default the checker misses:
                    # verifiers' artifact_max_bytes has a positional default, `Field(N)`, which the
                    # checker does not read as one, so it asks for the argument
                    name=f"{config.env_id}#{config.split or 'default'}/{seed}",
                    prompt=None,  # the env's first observation opens the exchange
                    agentrl_env=config.env_id, base_url=config.base_url, env_kwargs=config.env_kwargs,
                    seed=seed, split=config.split, options=config.options, native_tools=config.native_tools,
                ),
                config.task,
            )


class AgentrlEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """The agent; its harness runs in this process, so the runtime is only a scratch folder."""


class AgentrlEnv(vf.Env[AgentrlEnvConfig]):
    """The agentrl env plays the user; its reward is the trace's `agentrl_reward`."""

    async def run(self, task: AgentrlTask, agents: vf.Agents) -> None:
        data = task.data
        source = EnvSource(data.agentrl_env, data.base_url, _token(self.taskset.config), data.env_kwargs)
        client = source.async_client() if source.base_url is not None else None
        episode = AsyncRowEpisode(source, client)
        try:
            observation = await episode.start(data.row())
            tools = episode.info.get("tools") if data.native_tools else None
            async with agents.player.interaction(task) as interaction:
                if tools:
                    interaction.trace.info[TOOLS_KEY] = tools
                    observation = task_text(observation)
                segment = await interaction.turn(observation)
                while not segment.terminated:
                    calls = _tool_calls(segment)
                    result = await episode.step(tool_calls_action(calls) if calls else segment.last_reply)
                    if episode.done:
                        break
                    if calls:
                        answers: vf.Messages = [vf.ToolMessage(**m) for m in
                                                tool_messages(calls, result.observation)]
                        segment = await interaction.turn(answers)
                    else:
                        segment = await interaction.turn(result.observation)
            interaction.trace.record_reward(REWARD_NAME, episode.reward)
            interaction.trace.info["agentrl_done"] = episode.done
        finally:
            try:
                await episode.close()
            finally:
                if client is not None:
                    await client.aclose()


def _tool_calls(segment: vf.Segment) -> list[dict[str, Any]]:
    """The `tool_calls` of the segment's last reply, in the chat API's wire form ([] when none)."""
    from verifiers.v1.dialects.chat import message_to_wire

    replies = [m for m in segment.messages if m.role == "assistant"]
    if not replies:
        return []
    return message_to_wire(replies[-1]).get("tool_calls") or []


def _token(config: vf.TasksetConfig) -> str | None:
    var = getattr(config, "token_var", None)
    return os.environ.get(var) if var else None


class AgentrlChatConfig(vf.HarnessConfig):
    timeout_s: float = 600.0
    """Seconds one model reply may take."""


class AgentrlChatHarness(vf.Harness[AgentrlChatConfig]):
    """One chat completion per segment, sent from this process to the interception endpoint.

    verifiers records the exchange from the intercepted requests; a later segment resends the whole
    conversation (`Harness.resume`), as a stateless chat program does.
    """

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx: vf.ModelContext, trace: vf.Trace, runtime: vf.Runtime, endpoint: str,
                     secret: str, mcp_urls: dict[str, str], data: vf.TaskData) -> vf.ProgramResult:
        from verifiers.v1.dialects.chat import message_to_wire

        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        elif prompt is not None:
            messages.extend(message_to_wire(m) for m in prompt)
        body: dict[str, Any] = {"model": ctx.model, "messages": messages}
        tools = trace.info.get(TOOLS_KEY)
        if tools:
            body["tools"] = tools
        async with httpx.AsyncClient(timeout=self.config.timeout_s) as http:
            response = await http.post(f"{endpoint.rstrip('/')}/chat/completions", json=body,
                                       headers={"Authorization": f"Bearer {secret}"})
        ok = response.status_code == 200
        return vf.ProgramResult(exit_code=0 if ok else 1, stdout=response.text if ok else "",
                                stderr="" if ok else f"HTTP {response.status_code}: {response.text[:2000]}")


__all__ = ["AgentrlChatConfig", "AgentrlChatHarness", "AgentrlEnv", "AgentrlEnvConfig", "AgentrlTask",
           "AgentrlTaskData", "AgentrlTaskset", "AgentrlTasksetConfig"]
