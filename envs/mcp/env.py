"""MCP-v0: a Gymnasium text env over any MCP server, with tasks and rewards read from a task file.

The server's tools, as its `tools/list` gives them, are the agent's tools (plus the env's `finish`);
every call goes to the server through the official MCP SDK (`agentrl.mcp.client`), a server of its
own per episode (`agentrl.mcp.servers`), and the task's checks judge the episode after it ends
(`agentrl.mcp.tasks`).
"""

from __future__ import annotations

import functools
import warnings
import weakref
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, Field

from agentrl.core import StepResult, ToolEnv, ToolError, tool
from agentrl.core.tools import Tool
from agentrl.mcp.client import ServerFailure
from agentrl.mcp.sandboxed import start_sandboxed
from agentrl.mcp.servers import (
    EpisodeServer,
    ServerConfig,
    close_later,
    release_pool,
    shared_pool,
    start_local,
)
from agentrl.mcp.tasks import FinalState, Task, Verdict, judge, load_tasks, state_text, substitute
from agentrl.mcp.tools import ServerCall, ServerTool

if TYPE_CHECKING:
    from typing_extensions import Self

ISOLATIONS = ("sandbox", "process")
FINISH = "finish"
CHECK_RESULT_CHARS = 1 << 20  # of a check's call's result, read whole below that
_warned: set[tuple[str, ...]] = set()  # the command lines whose isolation="process" was warned about


class IsolationWarning(UserWarning):
    """An MCP server runs without a sandbox."""


class NotForkable(RuntimeError):
    """An episode whose server did not answer the same when its calls were replayed into a fresh one:
    a fork of it would not be the same episode."""


class FinishArgs(BaseModel):
    answer: str = Field(description="The final answer; an empty string when the task asks for none.")


def start_server(config: ServerConfig, task: Task) -> EpisodeServer:
    """A server for `task`, started and set up as `config` says."""
    if config.isolation == "sandbox" and not isinstance(config.server, str):
        return start_sandboxed(task, config)
    server = config.server if isinstance(config.server, str) else list(config.server)
    return start_local(
        task,
        server,
        call_timeout_s=config.call_timeout_s,
        max_tools=config.max_tools,
        start_timeout_s=config.start_timeout_s,
    )


def _close_quietly(held: list[EpisodeServer]) -> None:
    """Close what an env left open when it is collected without `close` (no server outlives it)."""
    while held:
        held.pop().close()


class MCPEnv(ToolEnv):
    """Solve a task with the tools of an MCP server, then call `finish`.

    ## Action space
    Text: the model's raw output. Each `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` in
    it runs in order, at most 8 a turn: a server tool (its arguments checked against its input
    schema first, then `tools/call`), or `finish` with `{"answer": str}`, which ends the episode.

    ## Observation
    Reset: the task's prompt, then the tools as OpenAI function schemas (also in `info["tools"]`).
    Step: one `<tool_response>` per call: the result's text (or its structured content as JSON),
    clipped to `max_result_chars`; an error result, an unknown tool, arguments the schema refuses, a
    server that crashed, hung past `call_timeout_s` or wrote junk on stdout each come back as an
    observation that says so, never as an exception. A server that crashed or hung ends the episode
    (`info["error"]`).

    ## Rewards
    At the end only: 1.0 when every check of the task passes (the `finish` answer, tool calls on the
    final state, a verifier), else 0.0; `info["checks"]` names each check's outcome. A server
    failure scores 0.

    ## Episode end
    Terminated by `finish` or a server failure; truncated after `max_turns` (checks run then too).

    ## Arguments
    - `server`: a stdio command line (list of strings; "{workspace}" is the episode's folder) or a
      streamable-HTTP URL (one shared server: nothing isolated).
    - `tasks`: a JSONL task file or a list of task dicts; `split`: "train" or "test".
    - `isolation`: "sandbox" (default: a container of the sandbox server, networking off) or
      "process" (a local subprocess with your user's rights: for trusted servers only).
    - `sandbox_url`, `sandbox_token`, `image`: the sandbox server and image (as Bash-v0 takes them).
    - `call_timeout_s`, `start_timeout_s`, `max_result_chars`, `max_tools` (tools offered, at most),
      `pool_size` (servers started ahead for the next episodes), `max_turns`, `render_mode`.

    `reset(seed=s)` draws a task of the split from the seed; `options={"task_id": ...}` names one.
    """

    default_max_turns = 20
    operator_kwargs = frozenset({"server", "tasks", "isolation", "sandbox_url", "sandbox_token", "image"})
    reset_options: ClassVar[frozenset[str]] = frozenset({"task_id"})

    def __init__(
        self,
        *,
        server: list[str] | tuple[str, ...] | str | None = None,
        tasks: str | list[dict[str, Any]] | None = None,
        split: str = "train",
        isolation: str = "sandbox",
        sandbox_url: str | None = None,
        sandbox_token: str | None = None,
        image: str | None = None,
        call_timeout_s: float = 10.0,
        start_timeout_s: float = 60.0,
        max_result_chars: int = 16_384,
        max_tools: int = 128,
        pool_size: int = 2,
        max_turns: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(max_turns=max_turns, render_mode=render_mode)
        self.split = split
        self.call_timeout_s = call_timeout_s
        self.max_result_chars = max_result_chars
        self.tasks: list[Task] = []
        self.config: ServerConfig | None = None
        self._held: list[EpisodeServer] = []  # the episode's server, while it runs
        self._closing: list[Future[None]] = []  # earlier episodes' servers, stopping in the background
        self._finalizer = weakref.finalize(self, _close_quietly, self._held)
        if server is not None or tasks is not None:  # else built without a server, to read its spaces
            self._configure(server, tasks, isolation)
            assert server is not None
            self.config = ServerConfig(
                server if isinstance(server, str) else tuple(server),
                isolation,
                sandbox_url,
                sandbox_token,
                image,
                call_timeout_s,
                start_timeout_s,
                max_tools,
            )
            self._pool = shared_pool(self.config, functools.partial(start_server, self.config), pool_size)
            self._pool_finalizer = weakref.finalize(self, release_pool, self.config)
        self.task: Task | None = None
        self.answer: str | None = None
        self.verdict: Verdict | None = None
        self.error: str | None = None
        self._specs: list[dict[str, Any]] = []
        self._states: list[str | None] | None = None  # the state checks' results after the last change

    def _configure(self, server: Any, tasks: Any, isolation: str) -> None:
        """Check the operator's arguments; raises ValueError naming what is wrong."""
        if server is None or tasks is None:
            raise ValueError("MCP-v0 needs both `server` and `tasks`")
        if isinstance(server, str):
            if not server.startswith(("http://", "https://")):
                raise ValueError(f"server must be a command line (a list) or an http(s) URL, not {server!r}")
        elif not server or not all(isinstance(part, str) and part for part in server):
            raise ValueError(
                "server must be a non-empty list of strings (the command line of a stdio server)"
            )
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {ISOLATIONS}, not {isolation!r}")
        if isolation == "process" and not isinstance(server, str) and tuple(server) not in _warned:
            _warned.add(tuple(server))  # once per command line: forks and pooled envs are no news
            warnings.warn(
                "MCP-v0 with isolation='process': the server runs as a local subprocess with this "
                "user's rights, outside any sandbox (files, network); use it for trusted servers only",
                IsolationWarning,
                stacklevel=4,
            )
        every = load_tasks(tasks)
        self.tasks = [t for t in every if t.split == self.split]
        if not self.tasks:
            raise ValueError(f"no task of split {self.split!r} among the {len(every)} given")
        if isinstance(server, str) and any(t.files or t.script for t in self.tasks):
            raise ValueError(
                "a server given by URL is shared by every episode: tasks cannot set up files there"
            )

    # --- episodes -----------------------------------------------------------------------------------
    @property
    def server(self) -> EpisodeServer | None:
        return self._held[0] if self._held else None

    def _pick_task(self, options: dict[str, Any]) -> Task:
        if unknown := set(options) - self.reset_options:
            raise ValueError(f"unknown reset options {sorted(unknown)}; known: {sorted(self.reset_options)}")
        if "task_id" in options:
            for task in self.tasks:
                if task.id == options["task_id"]:
                    return task
            raise ValueError(f"no task {options['task_id']!r} in split {self.split!r}")
        return self.tasks[int(self.np_random.integers(len(self.tasks)))]

    def _reset_world(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if self.config is None:
            raise ValueError(
                "MCP-v0 needs `server` (a stdio command line or a URL) and `tasks` to play an "
                "episode; they are the operator's arguments"
            )
        self._release()
        self.task = self._pick_task(options)
        self.answer, self.verdict, self.error, self._states = None, None, None, None
        server = self._pool.take(self.task)
        self._held.append(server)
        notes = []
        listed = [ServerTool.listed(t) for t in server.listing.tools]
        if any(t.name == FINISH for t in listed):
            notes.append(f"The server's own '{FINISH}' tool is not offered: '{FINISH}' ends the episode.")
        if server.listing.more:
            notes.append(
                f"The server lists more than {server.listing.limit} tools; the first "
                f"{server.listing.limit} are offered."
            )
        finish = type(self).tools[FINISH]
        tools: dict[str, Tool] = {t.name: t for t in listed if t.name != FINISH}
        tools[FINISH] = finish
        self.__dict__["tools"] = tools  # this episode's, over the class's (`finish` alone)
        self._specs = [t.spec() for t in tools.values()]
        if self.task.state:
            self._states = self._read_states()
            if self.error is not None:  # the server failed before the episode began: nothing to play
                self._release()
                raise ServerFailure("start", f"task {self.task.id!r}: {self.error}")
        prompt = substitute(self.task.prompt, server.workspace)
        if notes:
            prompt += "\n\n" + " ".join(notes)
        return prompt, {"task_id": self.task.id, "family": self.task.family, "split": self.task.split}

    def _trace_tools(self) -> list[dict[str, Any]]:
        return self._specs

    def _release(self) -> None:
        self._closing = [f for f in self._closing if not f.done()]
        while self._held:
            self._closing.append(close_later(self._held.pop()))

    def close(self) -> None:
        """Stop the episode's server and wait until every server this env started has stopped."""
        self._release()
        closing, self._closing = self._closing, []
        for future in closing:
            future.result()
        if self.config is not None:
            self._pool_finalizer()  # the last env of its configuration closes the pool
        super().close()

    # --- tools --------------------------------------------------------------------------------------
    def _call_server(self, call: ServerCall) -> str:
        """One server tool's call (`ServerTool.validate` made it); an error result raises ToolError."""
        server = self.server
        if server is None or self.error is not None:
            raise ToolError(f"not called: the server is not running ({self.error or 'the episode is over'})")
        try:
            text, is_error = server.call(
                call.name, call.arguments, self.call_timeout_s, self.max_result_chars
            )
        except ServerFailure as exc:
            self.error = f"the MCP server failed ({exc.kind}): {exc.message}"
            raise ToolError(self.error) from None
        count, lines = server.take_junk()
        if count:
            text += (
                f"\n[the server also wrote {count} line(s) to stdout that are not MCP messages, "
                f"ignored: {lines}]"
            )
        if is_error:
            raise ToolError(text)
        return text

    @tool("End the episode with your final answer.", ends_episode=True)
    def finish(self, args: FinishArgs) -> str:
        self.answer = args.answer
        return "episode finished"

    def _act(self, action: str) -> StepResult:
        result = super()._act(action)
        if self.error is not None and not result.terminated:
            self._release()
            result.observation += f"\nThe MCP server stopped working; the episode is over ({self.error})."
            result.terminated = True
            result.reward += self._final_reward()
        return result

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = super().step(action)
        if self.verdict is not None:
            info["checks"] = dict(self.verdict.checks)
        if self.error is not None:
            info["error"] = self.error
        return observation, reward, terminated, truncated, info

    # --- state and judging -------------------------------------------------------------------------
    def _check_call(self, name: str, arguments: dict[str, Any]) -> str | None:
        """A call made by the env for a check: its whole text, or None where it failed."""
        server = self.server
        if server is None or self.error is not None:
            return None
        try:
            text, is_error = server.call(name, arguments, self.call_timeout_s, CHECK_RESULT_CHARS)
        except ServerFailure as exc:
            self.error = f"the MCP server failed during a check ({exc.kind}): {exc.message}"
            return None
        return None if is_error else text

    def _read_states(self) -> list[str | None]:
        assert self.task is not None and self.server is not None
        return state_text(self.task, self.server.workspace, self._check_call)

    def _state_change(self) -> dict[str, Any] | None:
        """The state checks' results after a step that called the server (what it may have changed);
        forks compare them step by step, and `_world_state` names the state by them."""
        if self._states is None or self.server is None or self.error is not None:
            return None
        if not any(c.get("name") not in (None, FINISH) for c in self._step_calls):
            return None
        self._states = self._read_states()
        return {"state": list(self._states)}

    def _world_state(self) -> list[str | None] | None:
        return self._states

    def _final_reward(self) -> float:
        task = self.task
        if self.verdict is None and task is not None:
            if self.server is None or self.error is not None:
                self.verdict = Verdict({"server": False})
            else:
                self.verdict = self._judge(task)
            self._release()  # judged: the server has nothing left to do
        return float(self.verdict is not None and self.verdict.solved)

    def _judge(self, task: Task) -> Verdict:
        server = self.server
        assert server is not None and self._trace is not None
        states = self._read_states() if task.state else []

        def call_tool(name: str, arguments: dict[str, Any]) -> str:
            text = self._check_call(name, arguments)
            if text is None:
                raise ServerFailure(
                    "protocol", f"the verifier's call to '{name}' failed: {self.error or 'an error result'}"
                )
            return text

        trace = self._trace

        def final() -> FinalState:
            calls = [call for step in trace.steps for call in step["calls"]] + list(self._step_calls)
            return FinalState(task.raw, self.answer, calls, call_tool)

        try:
            return judge(task, self.answer, states, final)
        except ServerFailure:
            return Verdict({"verifier": False})

    # --- forks --------------------------------------------------------------------------------------
    def fork(self, n: int = 1) -> list[Self]:
        """n copies of the episode, each on a fresh server that replayed every call; raises
        `NotForkable` (leaving nothing open) where a replayed call answered differently."""
        forks = super().fork(n)
        diverged = sorted({step for child in forks for step in child.fork_divergence})
        if diverged:
            del self._forks[-n:]
            for child in forks:
                child.close()
            raise NotForkable(
                f"replayed into a fresh server, steps {diverged} gave other results than this "
                "episode's: the server is not deterministic, so the episode cannot be forked"
            )
        return forks
