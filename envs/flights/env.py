"""Flights-v0: book, cancel and change flights through tools over a per-episode SQLite world.

Each seed has its own world (see `world.py`), and each episode's database is a page copy of its
cached template (`templates.py`); the tools are ORM queries against it (`desk_tools.py`). The first
observation gives the desk policy and the customer's request; the agent ends with
`finish(outcome=...)`, and the reward is the verifier's judgement of that outcome and of the final
database (see `verify.py`). Stochastic options make the world move while the agent works: other
customers buy seats, the service is sometimes busy, and a fare may rise between search and booking.
This module is the episode: its arguments, reset, customer, rewards and records.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from agentrl.core import Tool, ToolEnv
from agentrl.core.parsing import parse_tool_calls
from agentrl.core.results import StepResult
from agentrl.flights.compact import OBSERVATIONS, compact_policy_text, compact_result, signatures
from agentrl.flights.customer import USER_KINDS, Customer, make_customer
from agentrl.flights.desk_tools import DeskTools
from agentrl.flights.episode import EpisodeDatabase
from agentrl.flights.task_ids import key_bytes
from agentrl.flights.tasks import FAMILIES, LEVELS, SPLITS, TASKS, Task
from agentrl.flights.templates import WORLDS, fingerprint
from agentrl.flights.text import policy_text
from agentrl.flights.verify import verify
from agentrl.flights.world import World

# the interaction levels, each a class with its own tool table (see `granularity.py`)
GRANULARITIES = ("coarse", "default", "fine")
# subgoals every task shares, each open to every candidate answer and to every outcome
GOALS = ("looked_up_customer", "searched_route")
# what `Tool.method` names in compact mode: the tool of that name, its result trimmed (`__getattr__`)
COMPACT_METHOD = "_compact_"


class FlightsEnv(DeskTools, EpisodeDatabase, ToolEnv):
    """An airline customer-service desk: handle one customer's request under a written policy.

    ## Description
    Each seed has its own world (airports, flights, customers, bookings) in a per-episode SQLite
    database, and a request from one of six families (`cheapest`, `seat`, `budget`, `multi_pax`,
    `cancel_rebook`, `change_earlier`) at one of three levels. The agent looks things up and books,
    cancels or changes through tools, then declares the outcome with `finish`: done, infeasible (no
    flight satisfies the request) or refused (the policy forbids it). With `stochastic=True` the world
    moves while the agent works: other customers buy seats, the service is sometimes busy, a fare may
    rise between search and booking.

    ## Action Space
    Text (`TextSpace`): tool calls, `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, up to 8
    a turn. `granularity` ("coarse" | "default" | "fine") puts the same desk behind other tools: each
    level is a subclass, which `gym.make("agentrl/Flights-v0", granularity=...)` builds
    (`granularity.py`). With a customer (`user` set), a turn with no tool call is a message to it.

    ## Observation Space
    Text (`TextSpace`): first the policy, the request and the tools, then the tool results inside
    `<tool_response>` tags, or the customer's reply. `observation="full"` (default) gives the policy in
    prose and the tools as JSON schemas; `"compact"` the policy as short rules, the tools as one-line
    signatures and trimmed tool results (`compact.py`). Tasks, tools, actions and rewards are the same in
    both. A malformed call is answered with an error message.

    ## Rewards
    1 at the end only if `finish` declared the right outcome and the final database holds exactly the
    requested change (none when the request is infeasible or refused) and nothing else (`verify.py`);
    otherwise 0. With `shaped_reward=True`, also `shaping` the first time each subgoal every task shares
    is reached (the customer looked up, the route searched; `info["progress"]`).

    ## Starting State
    `reset(seed=n)` plays task n of the split; `options` may name `family`, `level`, `split` and
    `world_seed` (one of many moving worlds for the same task). `user=None` (default): the first
    observation holds the whole request. `user="deterministic"`: only the customer's opening (goal and
    route), the rest told when asked, by keyword rules (`customer.py`); `user="llm"`: the same opening,
    then a chat model answers. `info` carries the task's opaque `task_id` (a keyed hash, see
    `task_ids.py`), its split and `progress`; what the task is only with `privileged_info=True`.

    ## Episode End
    - Termination: `finish` is called.
    - Truncation: after `max_turns` steps (default 30); the database is judged as it is, with no
      outcome declared, so the reward is 0 (plus any shaping already paid).

    ## Arguments
    `days` (1), `families` and `levels` (all), `split` ("train"); `stochastic` (False) or each of its
    parts: `churn`, `busy_rate`, `fare_changes`; `shaped_reward` (False), `shaping` (0.1);
    `privileged_info` (False) and `task_id_key`, an operator's secret (default: a random key per
    process); `granularity`, `observation`; `user` with `user_model`, `user_base_url` (an
    OpenAI-compatible endpoint), `user_api_key`, `user_temperature` (0.0) and `user_seed` (0), kept in
    the episode's record; `max_turns` (30), `render_mode`.
    """

    default_max_turns = 30
    max_calls_per_turn = 8
    task_fields: ClassVar[tuple[str, ...]] = ("family", "level", "split")
    # the answer key: a server takes it from its operator only (oracle analysis, SFT export)
    # and the task-id key: a client that chose it could invert the ids (see `task_ids.py`)
    # and the customer model's endpoint and key (as TauAirline-v0's)
    operator_kwargs = frozenset({"privileged_info", "task_id_key", "user_base_url", "user_api_key"})
    granularity: ClassVar[str] = "default"
    # the episode's world and request: set by every reset, and no tool runs before the first
    world: World
    task: Task

    def __init__(
        self,
        *,
        days: int = 1,
        families: tuple[str, ...] | list[str] | None = None,
        levels: tuple[int, ...] | list[int] | None = None,
        split: str = "train",
        stochastic: bool = False,
        churn: bool | None = None,
        busy_rate: float | None = None,
        fare_changes: bool | None = None,
        shaped_reward: bool = False,
        shaping: float = 0.1,
        privileged_info: bool = False,
        task_id_key: str | None = None,
        max_turns: int | None = None,
        render_mode: str | None = None,
        granularity: str | None = None,
        user: str | None = None,
        user_model: str | None = None,
        user_base_url: str | None = None,
        user_api_key: str | None = None,
        user_temperature: float = 0.0,
        user_seed: int | None = 0,
        observation: str = "full",
    ) -> None:
        # the level is the class (`make_flights_env` picks it); the argument is accepted and checked so
        # that the kwargs `gym.make` was given rebuild the same env (a replayed fork, a recipe)
        self._check_granularity(granularity)
        super().__init__(max_turns=max_turns, render_mode=render_mode)
        if days < 1:
            raise ValueError("days must be at least 1")
        self.days = days
        self.families = tuple(families or FAMILIES)
        self.levels = tuple(levels or LEVELS)
        self.split = split
        self._check_choice(self.families, self.levels, split)
        self.churn = stochastic if churn is None else churn
        self.busy_rate = (0.15 if stochastic else 0.0) if busy_rate is None else busy_rate
        self.fare_changes = stochastic if fare_changes is None else fare_changes
        self.shaped_reward, self.shaping = shaped_reward, shaping
        self.privileged_info = privileged_info
        self._task_id_key = key_bytes(task_id_key)
        if user not in USER_KINDS:
            raise ValueError(f"user must be one of {USER_KINDS} (None: the whole request), not {user!r}")
        if user == "llm" and (not user_model or not user_base_url):
            raise ValueError("user='llm' needs user_model and user_base_url (an OpenAI-compatible endpoint)")
        self.user_kind = user
        self.user_model = {"base_url": user_base_url, "model": user_model, "temperature": user_temperature,
                           "seed": user_seed, "api_key": user_api_key}
        if observation not in OBSERVATIONS:
            raise ValueError(f"observation must be one of {OBSERVATIONS}, not {observation!r}")
        self.observation_mode = observation
        if observation == "compact":  # the same tools, each answering through `__getattr__`
            self.tools: dict[str, Tool] = {
                name: dataclasses.replace(spec, method=COMPACT_METHOD + spec.method)
                for name, spec in type(self).tools.items()
            }
        self.customer: Customer | None = None
        self._open_database()
        self._reset_seed: int | None = None
        self.world = None  # type: ignore[assignment]  # until the first reset
        self.task = None  # type: ignore[assignment]  # until the first reset

    @classmethod
    def _check_granularity(cls, granularity: str | None) -> None:
        if granularity is None or granularity == cls.granularity:
            return
        if granularity not in GRANULARITIES:
            raise ValueError(f"granularity must be one of {GRANULARITIES}, not {granularity!r}")
        raise ValueError(
            f"{cls.__name__} has granularity {cls.granularity!r}, not {granularity!r}: "
            "gym.make('agentrl/Flights-v0', granularity=...) builds each level's class"
        )

    @staticmethod
    def _check_choice(families: tuple[str, ...], levels: tuple[int, ...], split: str) -> None:
        if unknown := set(families) - set(FAMILIES):
            raise ValueError(f"unknown task families {sorted(unknown)}; choose from {FAMILIES}")
        if unknown_levels := set(levels) - set(LEVELS):
            raise ValueError(f"unknown levels {sorted(unknown_levels)}; choose from {LEVELS}")
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}")

    # --- episode lifecycle -----------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        self._reset_seed = seed
        return super().reset(seed=seed, options=options)

    def _reset_world(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        known = (*self.task_fields, "world_seed")
        if unknown := set(options) - set(known):
            raise ValueError(f"unknown reset options {sorted(unknown)}; known: {known}")
        world_seed = options.get("world_seed")
        if world_seed is not None and (type(world_seed) is not int or world_seed < 0):
            raise ValueError(f"world_seed must be a non-negative integer, not {world_seed!r}")
        family = options.get("family") or self.families[int(self.np_random.integers(len(self.families)))]
        level = int(options.get("level") or self.levels[int(self.np_random.integers(len(self.levels)))])
        split = options.get("split", self.split)
        self._check_choice((family,), (level,), split)
        index = self._reset_seed if self._reset_seed is not None else int(self.np_random.integers(2**31))
        self.world, self.task = TASKS.get(split, index, self.days, family, level, self.fare_changes)
        self.session.close()
        WORLDS.copy_into(self.world, self._raw)
        # the moving world's own stream: the task's by default, or one of many for the same task
        # (`world_seed`), so that a group of rollouts of one task can meet different worlds
        words = [index, SPLITS.index(split), 31337] + ([] if world_seed is None else [world_seed])
        self._rng = np.random.default_rng(words)
        self._last_search = []
        self._pnrs = set(self.world.bookings)
        self._was_busy = False
        self._fare_changed = False
        self._outcome = None
        self._progress = dict.fromkeys(GOALS, False)
        self._paid_goals = 0
        task_id = self.task.task_id(self.days, self.fare_changes, self._task_id_key)
        info: dict[str, Any] = {"task_id": task_id, "split": split}
        if self.privileged_info:
            info["task"] = {**self.task.privileged(), "world": list(self.world.key)}
        policy = compact_policy_text if self.observation_mode == "compact" else policy_text
        text = f"{policy(self.world.now)}\n\n# Customer request\n{self._request_text()}"
        return text, info

    def _tools_text(self, specs: list[dict[str, Any]]) -> str:  # type: ignore[override]
        """The tool list of the first observation: JSON schemas, or one-line signatures (compact)."""
        if self.observation_mode == "compact":
            return signatures(type(self).tools)
        return super()._tools_text(specs)

    def __getattr__(self, name: str) -> Any:
        """Compact mode's tool methods (`COMPACT_METHOD` + a tool's method): the tool, its result
        trimmed for the compact observation (`compact.compact_result`)."""
        if not name.startswith(COMPACT_METHOD):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        tool = name.removeprefix(COMPACT_METHOD)  # a tool's method is named as the tool (`@tool`)
        method = getattr(self, tool)
        return lambda *args: compact_result(tool, method(*args))

    def _request_text(self) -> str:
        """The request as the first observation gives it: whole, or the customer's opening."""
        if self.user_kind is None:
            return self.task.text
        names = {p: self.world.passengers[p]["name"] for p in self.task.request["passengers"]}
        self.customer = make_customer(self.user_kind, self.task.request, names, self.task.text,
                                      self.user_model)
        return self.customer.first_message()

    def _act(self, action: str) -> StepResult:
        if self.customer is None or parse_tool_calls(action, self.max_calls_per_turn):
            return super()._act(action)
        result = self.customer.turn(action, self._step_calls, self._step_reward(), self._step_info())
        self._show(result.observation)  # what the customer told is known from here on
        return result

    def _trace_meta(self) -> dict[str, Any]:
        return {"user": self.customer.settings()} if self.customer is not None else {}

    def _step_info(self) -> dict[str, Any]:
        if self.task is None:
            return {}
        return {"progress": dict(self._progress)}

    def _step_reward(self) -> float:
        if not self.shaped_reward:
            return 0.0
        reached = sum(self._progress.values())
        paid, self._paid_goals = self._paid_goals, reached
        return self.shaping * (reached - paid)

    def _final_reward(self) -> float:
        return float(verify(self.session, self.world, self.task, self._outcome))

    def close(self) -> None:
        self.session.close()
        self._engine.dispose()

    def fingerprint(self) -> str:
        """Hash of the episode database's current contents (see `world.fingerprint`)."""
        with self._engine.connect() as conn:
            return fingerprint(conn)
