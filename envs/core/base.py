"""Base classes of agentrl's text environments.

`TextEnv` holds what every multi-turn text env shares (spaces, turn counting, `max_turns`
truncation, the transcript, ansi rendering, forks and the trajectory record). `ToolEnv` adds the
tool-calling action format on top, so a concrete env only defines its world and its `@tool` methods.
"""

from __future__ import annotations

import bisect
import copy
import functools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import gymnasium as gym

from agentrl.core.encoding import utf8_safe
from agentrl.core.fork import copy_env, replay_env
from agentrl.core.parsing import ParseFailure, parse_tool_calls
from agentrl.core.results import StepResult
from agentrl.core.spaces import TextSpace
from agentrl.core.state_hash import canonical, state_hash, text_digest
from agentrl.core.tools import Tool, ToolError, collect_tools, tool_response
from agentrl.core.trajectory import StateChange, Trace, call_record, record

if TYPE_CHECKING:
    from typing_extensions import Self

TRUNCATION_MARK = "\n...[truncated {n} characters]"
# What `ToolEnv`'s first observation puts between the task and what follows it: the header, the tool
# listing, then the hint. A chat API that takes the tools typed gets the observation without them.
TOOLS_HEADER = "\n\n# Tools\nYou may call one or more functions. Available tools:\n"
CALL_HINT = (
    '\n\nCall a tool as <tool_call>{"name": <tool-name>, "arguments": <args-json>}</tool_call>. '
    "Results come back inside <tool_response></tool_response>."
)


class EpisodeOverError(RuntimeError):
    """`step` was called on an episode that has already terminated or been truncated."""


def clip_text(text: str, limit: int) -> str:
    """Cut `text` to at most `limit` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - len(TRUNCATION_MARK.format(n=len(text))))
    return text[:keep] + TRUNCATION_MARK.format(n=len(text) - keep)


def _recording_init(init: Callable[..., None]) -> Callable[..., None]:
    """Wrap an env's `__init__` so the outermost call keeps its arguments: a replayed fork is built
    from them, without each env having to cooperate."""

    @functools.wraps(init)
    def recording_init(self: TextEnv, *args: Any, **kwargs: Any) -> None:
        if "_init_call" not in self.__dict__:
            self._init_call = (args, dict(kwargs))
        init(self, *args, **kwargs)

    return recording_init


class TextEnv(gym.Env[str, str]):
    """A multi-turn env whose actions and observations are strings.

    Subclasses implement `_begin` (build the world, return the first observation) and `_act`
    (apply one action). Truncation at `max_turns` and the transcript are handled here once.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 4}
    default_max_turns: ClassVar[int] = 20
    # Constructor arguments that reach outside the episode (endpoints, credentials, server-side
    # paths, images): a server takes them from its operator, never from a client.
    operator_kwargs: ClassVar[frozenset[str]] = frozenset()
    # How `fork` makes its copies: False replays the episode into a fresh env (always correct for a
    # deterministic env); True copies this one (`fork.copy_env`), for envs whose state is cheap to
    # copy. Copying shares `fork_shared` attributes (read-only data: a corpus, a retriever) and
    # deep-copies every other one, then `_fork_resources` gives the copy what cannot be deep-copied.
    fork_by_copy: ClassVar[bool] = False
    fork_shared: ClassVar[frozenset[str]] = frozenset()
    _init_call: tuple[tuple[Any, ...], dict[str, Any]]  # the outermost `__init__`'s (args, kwargs)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _recording_init(cls.__dict__["__init__"])  # type: ignore[method-assign]  # on purpose

    def __init__(
        self,
        *,
        max_turns: int | None = None,
        render_mode: str | None = None,
        max_action_chars: int = 65_536,
        max_observation_chars: int = 262_144,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}")
        self.render_mode = render_mode
        self.max_turns = max_turns if max_turns is not None else self.default_max_turns
        if self.max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self.action_space: TextSpace = TextSpace(max_action_chars)
        self.observation_space: TextSpace = TextSpace(max_observation_chars)
        self.turn = 0
        self._over = True
        self._trace: Trace | None = None  # the trajectory record so far, and what replaying it needs
        self._forks: list[tuple[int, TextEnv]] = []  # (steps taken when forked, the fork)
        self._step_calls: list[dict[str, Any]] = []  # the current step's calls (`trajectory.call_record`)
        self._pending_rng_state: dict[str, Any] | None = None
        self.fork_divergence: list[int] = []

    # --- hooks -----------------------------------------------------------------------------
    def _begin(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def _act(self, action: str) -> StepResult:
        raise NotImplementedError

    def _reward_on_truncation(self) -> float:
        """Reward for the state the episode was left in when `max_turns` ran out."""
        return 0.0

    def _state_change(self) -> dict[str, Any] | StateChange | None:
        """What the step just taken changed in the world's state (decoded when a record is built, see
        `trajectory.StateChange`); None for envs without a database."""
        return None

    def _state(self) -> Any:
        """The state the next step depends on, as plain data, hashed into every `info["state_hash"]`
        (see `core.state_hash`): by default the whole transcript, which is always enough (and
        groups only identical histories); envs name a smaller state."""
        return self.messages

    def _trace_tools(self) -> list[dict[str, Any]]:
        """The tool specs a trajectory record lists."""
        return []

    def _trace_meta(self) -> dict[str, Any]:
        """What a trajectory record keeps as `meta` besides the env's own steps (see `Trace.meta`)."""
        return {}

    def _fork_resources(self, child: Self) -> None:
        """Give a copy-fork (`fork_by_copy`) its own copy of what deep-copying cannot copy."""

    # --- gymnasium API ---------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        if self._pending_rng_state is not None:  # a replayed fork: the parent's generator, as it was
            self.np_random.bit_generator.state = self._pending_rng_state
            self._pending_rng_state = None
        self.turn = 0
        self._over = True  # until the world is built: a failed reset leaves no episode to step or fork
        self._forks = []
        self.fork_divergence = []
        # how the reset went, for a replay: its options, and the generator's state before the world
        replay = {"options": copy.deepcopy(options or {}), "rng_state": self.np_random.bit_generator.state}
        observation, info = self._begin(dict(options or {}))
        self._over = False
        observation = utf8_safe(clip_text(observation, self.observation_space.max_length))
        info.setdefault("turn", 0)
        env_id = self.spec.id if self.spec is not None else None
        self._trace = Trace(env_id, info.get("task_id"), seed, observation, self._trace_tools(),
                            meta=self._trace_meta(), **replay)
        info["state_hash"] = state_hash(self._state())  # after the trace: `_state` may read it
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._over:
            raise EpisodeOverError("the episode is over; call reset() to start a new one")
        self.turn += 1
        self._step_calls = []
        if not isinstance(action, str):
            result = StepResult(
                f"Invalid action: expected text, got {type(action).__name__}.", 0.0, False, False
            )
        elif len(action) > self.action_space.max_length:
            result = StepResult(
                f"Invalid action: {len(action)} characters exceeds the limit of "
                f"{self.action_space.max_length}; nothing was executed.",
                0.0,
                False,
                False,
            )
        else:
            result = self._act(action)
        if not result.terminated and self.turn >= self.max_turns:
            result.truncated = True
            result.reward += self._reward_on_truncation()
        result.observation = utf8_safe(clip_text(result.observation, self.observation_space.max_length))
        result.info["turn"] = self.turn
        self._over = result.terminated or result.truncated
        said = utf8_safe(action if isinstance(action, str) else repr(action))
        assert self._trace is not None, "an episode under way has its record"
        self._trace.add(
            action,
            said,
            self._step_calls,
            result.observation,
            result.reward,
            result.terminated,
            result.truncated,
            self._state_change(),
        )
        result.info["state_hash"] = state_hash(self._state())  # after `_state_change`: the world as it is now
        return result.as_tuple()

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The episode so far as chat turns (the first observation, then each action and its
        observation): a view of the trajectory record, built when read (`Trace.messages`)."""
        return [] if self._trace is None else self._trace.messages()

    def fork(self, n: int = 1) -> list[Self]:
        """n independent envs whose state (world, turn, transcript, random streams, trajectory so far)
        equals this one's now: continued with this env's next actions, each returns exactly its
        results. The forks are remembered here, as children of this episode's trajectory."""
        if self._over:
            raise EpisodeOverError("only an episode in progress can be forked; this one is over")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive integer, not {n!r}")
        forks = [copy_env(self) if self.fork_by_copy else replay_env(self) for _ in range(n)]
        self._forks.extend((self.turn, child) for child in forks)
        return forks

    def trajectory(self) -> dict[str, Any]:
        """The episode so far as a JSON-serialisable `agentrl.trajectory/1` record, forks included
        (see `agentrl.core.trajectory`)."""
        return record(self)

    __init__ = _recording_init(__init__)  # type: ignore[method-assign]  # the same wrapper as subclasses'

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        lines = []
        for message in self.messages:
            lines.append(f"[{message['role']}]\n{message['content']}")
        return "\n\n".join(lines) + "\n"

    @property
    def episode_over(self) -> bool:
        return self._over


class ToolEnv(TextEnv):
    """A text env whose actions are tool calls in the model's raw text.

    Subclasses define `@tool` methods, `_reset_world` and `_final_reward`; one tool with
    `ends_episode=True` (conventionally `finish`) terminates the episode.
    """

    tools: ClassVar[dict[str, Tool]] = {}
    _tool_specs: ClassVar[list[dict[str, Any]]]
    max_calls_per_turn: ClassVar[int] = 8

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.tools = collect_tools(cls)

    # --- hooks -----------------------------------------------------------------------------
    def _reset_world(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Build this episode's world from `self.np_random`; return the task text and info."""
        raise NotImplementedError

    def _final_reward(self) -> float:
        """Reward for the final state, once the episode ends (finish or truncation)."""
        raise NotImplementedError

    def _step_reward(self) -> float:
        """Reward paid on every step; 0 unless an env offers shaping."""
        return 0.0

    def _step_info(self) -> dict[str, Any]:
        """Extra info merged into every step's and reset's info (e.g. progress)."""
        return {}

    def _world_state(self) -> Any:
        """The part of the state the tool results shown do not tell (a database's changed rows);
        None for envs whose world is the task alone."""
        return None

    def _state(self) -> str:
        """The task, the set of tool results shown (a set: the order they came in does not change
        what the agent knows) and the world's own state (`_world_state`), as one line: the digests of
        the task and of each result (fixed-length hex, sorted), then the world's canonical JSON. A line
        is hashed in a microsecond where the same as a JSON object takes several, at every step."""
        assert self._trace is not None, "the state of an episode that has not been reset"
        task = self._trace.observation
        if self._task_digest[0] is not task:  # once per episode: the task text is long, its digest short
            self._task_digest = (task, text_digest(task))
        world = self._world_state()
        return " ".join([self._task_digest[1], *self._shown, "|", "" if world is None else canonical(world)])

    # --- shared machinery ------------------------------------------------------------------
    @classmethod
    def tool_specs(cls) -> list[dict[str, Any]]:
        """The tools as OpenAI function schemas; shared by every episode, so treat as read-only."""
        # pydantic spends ~2 ms building each schema: once per class, not once per reset
        if "_tool_specs" not in cls.__dict__:
            cls._tool_specs = [t.spec() for t in cls.tools.values()]
        return cls._tool_specs

    def _trace_tools(self) -> list[dict[str, Any]]:
        return self.tool_specs()

    @classmethod
    def _tools_text(cls, specs: list[dict[str, Any]]) -> str:
        """The specs as the first observation lists them: written once per class for its own specs
        (a tenth of a light env's reset), each time for any other list."""
        if specs is not cls.__dict__.get("_tool_specs"):
            return "\n".join(json.dumps(s, ensure_ascii=False) for s in specs)
        if "_tool_specs_text" not in cls.__dict__:
            cls._tool_specs_text = "\n".join(json.dumps(s, ensure_ascii=False) for s in specs)
        return cls._tool_specs_text

    def _begin(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        task, info = self._reset_world(options)
        self._shown: list[str] = []  # the digests of the tool results shown so far, sorted (`_state`)
        self._task_digest: tuple[str | None, str] = (None, "")  # the task text and its digest
        specs = self._trace_tools()
        observation = task + TOOLS_HEADER + self._tools_text(specs) + CALL_HINT
        return observation, {**info, "tools": specs, **self._step_info()}

    def _act(self, action: str) -> StepResult:
        items = parse_tool_calls(action, self.max_calls_per_turn)
        if not items:
            names = ", ".join(self.tools)
            message = (
                "No tool call found. Call a tool as "
                '<tool_call>{"name": ..., "arguments": {...}}</tool_call>. '
                f"Available tools: {names}."
            )
            return StepResult(message, self._step_reward(), False, False,
                              {"calls": [], "invalid_calls": 0, **self._step_info()})
        responses: list[str] = []
        calls: list[dict[str, Any]] = []
        terminated = False
        for item in items:
            if terminated:
                responses.append(tool_response("finish", "ignored: the episode already ended", error=True))
                continue
            if isinstance(item, ParseFailure):
                responses.append(tool_response("invalid_call", item.message, error=True))
                calls.append({"name": None, "ok": False, "error": item.message})
                self._step_calls.append(call_record(None, None, False, responses[-1]))
                continue
            spec = self.tools.get(item.name)
            try:
                if spec is None:
                    raise ToolError(f"unknown tool '{item.name}'; available tools: {', '.join(self.tools)}")
                arguments = spec.validate(item.arguments)
                method = getattr(self, spec.method)
                content = method(arguments) if spec.takes_arguments else method()
            except ToolError as exc:
                responses.append(tool_response(item.name, str(exc), error=True))
                calls.append({"name": item.name, "ok": False, "error": str(exc)})
                self._step_calls.append(call_record(item.name, item.arguments, False, responses[-1]))
                continue
            responses.append(tool_response(item.name, content))
            self._show(responses[-1])
            calls.append({"name": item.name, "ok": True})
            self._step_calls.append(call_record(item.name, item.arguments, True, responses[-1]))
            terminated = spec.ends_episode
        reward = self._step_reward()
        if terminated:
            reward += self._final_reward()
        info = {
            "calls": calls,
            "invalid_calls": sum(1 for c in calls if not c["ok"]),
            **self._step_info(),
        }
        return StepResult("\n".join(responses), reward, terminated, False, info)

    def _show(self, text: str) -> None:
        """Count `text` (a tool result, or another answer the env gave) among what the agent has
        been shown: part of the state `state_hash` names."""
        digest = text_digest(text)  # a step hashes the set of digests, not the texts
        at = bisect.bisect_left(self._shown, digest)
        if self._shown[at:at + 1] != [digest]:
            self._shown.insert(at, digest)

    def _reward_on_truncation(self) -> float:
        return self._final_reward()
