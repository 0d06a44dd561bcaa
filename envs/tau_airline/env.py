"""TauAirline-v0: τ-bench's airline customer-service domain as a Gymnasium env, customer included.

The episode, its reference (the state the task's gold actions leave) and its reward; the tools
are `airline_tools.py`'s.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agentrl.core import ToolError
from agentrl.core.encoding import utf8_safe
from agentrl.core.parsing import parse_tool_calls
from agentrl.core.results import StepResult
from agentrl.core.tools import Tool
from agentrl.core.trajectory import call_record
from agentrl.core.users import DEFAULT_GUIDELINES, STOP, LLMUser, ScriptedUser
from agentrl.tau_airline import desk as d
from agentrl.tau_airline.airline_tools import AirlineTools
from agentrl.tau_airline.data import TAU2_BENCH, AirlineData, Task, load
from agentrl.tau_airline.database import (
    EpisodeDatabase,
    reservation_json,
    state_key,
    template_image,
    user_json,
)
from agentrl.tau_airline.models import Reservation, User
from agentrl.tau_airline.strict import forbidding_rules, named_rules, rules_ok, said_whole
from agentrl.tau_airline.tau2_desk import TOOLS as TAU2_TOOLS
from agentrl.tau_airline.tau2_desk import Tau2Desk

RESPOND = "respond"
TRANSFER = "transfer_to_human_agents"
# What counts as stating a refusal under `strict_refusals` (matched case-insensitively as words).
REFUSAL_PHRASES = (
    "cannot", "can't", "can not", "unable", "not able", "not possible", "not allowed", "not permitted",
    "not eligible", "ineligible", "against our policy", "against the policy", "not something i can",
    "won't be able", "will not be able", "must decline", "have to decline", "i'm sorry, but",
    "i am sorry, but",
)
_REFUSAL = re.compile("|".join(rf"\b{re.escape(p)}(?!\w)" for p in REFUSAL_PHRASES), re.IGNORECASE)
# A message with more numbers than this says no required output: a reply that lists every number it
# could mean (a "spray") is not an answer. A real answer names a few amounts, ids or counts.
MAX_NUMBERS_PER_MESSAGE = 20
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# gold calls a refusal need not repeat to be grounded: free text (`think`) and arithmetic
UNGROUNDING = frozenset({RESPOND, TRANSFER, "think", "calculate"})


def new_desk(data: AirlineData, session: Any) -> d.Desk:
    """The desk of the data's benchmark: τ-bench's tools, or τ²-bench's."""
    return Tau2Desk(session) if data.layout == TAU2_BENCH else d.Desk(session)


def layout_tools(layout: str) -> tuple[str, ...]:
    """The tools an episode offers: τ-bench's 14, or τ²-bench's (no `think`, `get_flight_status`)."""
    if layout == TAU2_BENCH:
        return TAU2_TOOLS
    return tuple(name for name in TauAirlineEnv.tools if name != "get_flight_status")


def gold_state(data: AirlineData, task: Task) -> str:
    """The database as the task's gold actions leave it (tool calls only; the transfer ends a
    conversation and changes nothing), built once per task like the benchmark's reference run."""
    key = ("gold", task.index)
    with data.lock:
        if key in data.cache:
            return data.cache[key]
    db = EpisodeDatabase(template_image(data))
    try:
        desk = new_desk(data, db.session)
        offered = layout_tools(data.layout)
        for action in task.actions:
            spec = TauAirlineEnv.tools.get(action.name)
            if action.name in (RESPOND, TRANSFER) or spec is None or action.name not in offered:
                continue
            try:
                method = getattr(desk, action.name)
                method(spec.validate(action.kwargs)) if spec.takes_arguments else method()
            except ToolError:
                pass  # a failing gold call is an observation in the benchmark's run too
        state = state_key(db.session)
    finally:
        db.close()
    with data.lock:
        data.cache[key] = state
    return state


def initial_state(data: AirlineData) -> str:
    """The database as loaded (a task whose gold leaves it so is a refusal or hand-off task)."""
    with data.lock:
        if "initial" in data.cache:
            return data.cache["initial"]
    db = EpisodeDatabase(template_image(data))
    try:
        state = state_key(db.session)
    finally:
        db.close()
    with data.lock:
        data.cache["initial"] = state
    return state


def refusal_tasks(data: AirlineData) -> list[Task]:
    """The tasks whose gold leaves the database unchanged and asks for no output: refusals and
    hand-offs, which the benchmark pays to an agent that does nothing."""
    initial = initial_state(data)
    return [t for t in data.tasks if not t.outputs and gold_state(data, t) == initial]


def gold_actions(task: Task) -> list[str]:
    """A policy that replays the task's gold: each gold tool call as one action, then the hand-off
    when the gold has one and nothing must be said, else one message to the customer saying what
    the gold says and the required outputs (with the default scripted customer, that message ends
    the conversation)."""
    said = [a.kwargs.get("content", "") for a in task.actions if a.name == RESPOND]
    steps = [f"<tool_call>{json.dumps({'name': a.name, 'arguments': a.kwargs})}</tool_call>"
             for a in task.actions if a.name not in (RESPOND, TRANSFER)]
    handoff = [a for a in task.actions if a.name == TRANSFER]
    if handoff and not said and not task.outputs:
        transfer = json.dumps({"name": TRANSFER, "arguments": handoff[0].kwargs})
        return [*steps, f"<tool_call>{transfer}</tool_call>"]
    return [*steps, " ".join([*said, *task.outputs]) or "Is there anything else I can help you with?"]


class TauAirlineEnv(AirlineTools):
    """τ-bench's airline domain: serve a customer by talking to them and calling the airline's tools.

    ## Description
    `data_dir` is τ-bench's airline folder (`tau_bench/envs/airline` of a tau-bench checkout): its
    users, flights and reservations JSON, the policy `wiki.md` and the task list `tasks_<split>.py`;
    or τ²-bench's (`data/tau2/domains/airline` of a tau2-bench checkout), recognised by its database
    file `db.json` (or `db.toml`), with `policy.md`, `tasks.json` and `split_tasks.json` (`split`
    names one of its splits). Nothing is downloaded. The documents are loaded once per process into
    a SQLite template; each episode works on its own page copy of it. The tools are the benchmark's,
    same arguments and results: τ-bench's 14 (see `desk.py` for its quirks), or τ²-bench's 14 with its
    data (no `think`, `get_flight_status`; see `tau2_desk.py`).

    ## Action Space
    Text (`TextSpace`): either tool calls (`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`,
    up to 8) or, when it holds no tool call, a message to the customer.

    ## Observation Space
    Text (`TextSpace`): the tool results inside `<tool_response>` tags, or the customer's reply. The
    customer is `user="scripted"`, which replays `user_turns` (or `options["user_turns"]`; default: the
    task's instruction as the one opening message), then ends the chat; or `user="llm"`, an
    OpenAI-compatible chat model at `user_base_url` named `user_model` that plays the customer from the
    task's instruction and the guidelines (`user_guidelines.md` in `data_dir`, else built-in ones), with
    `user_temperature` and `user_seed`, both kept in the episode's record.

    ## Rewards
    At the end, as the benchmark computes it: 1 if the database equals the one the task's gold actions
    produce and every required output was said to the customer (case-insensitive, commas ignored),
    else 0. A τ²-bench task counts the parts its `reward_basis` names (DB, COMMUNICATE, and ACTION:
    every gold action matched by one of the agent's calls on its `compare_args`). Always: a message with
    more than `MAX_NUMBERS_PER_MESSAGE` numbers says no required output (the benchmark's substring rule
    would pay a message listing every number).

    With `strict_refusals=True`, a task whose gold leaves the database unchanged and asks for no output
    (a refusal or hand-off task) also needs the refusal stated and grounded: where the gold hands off,
    the hand-off (`transfer_to_human_agents`); elsewhere a message with a refusal phrase
    (`REFUSAL_PHRASES`) and no hand-off; either way after the look-ups the gold makes (each of its calls
    but `think`, `calculate` and the hand-off, made by the agent with the same arguments and answered
    without error), or, where the gold makes none, after reading the customer's profile and one of the
    customer's reservations; and reasoned: naming the policy rules that forbid the request and no other
    (`agentrl.tau_airline.strict`); outputs then match as whole words. `wrong_refusal_penalty` is taken
    from a failed episode of another task that ended on a refusal or hand-off (see
    `strict.blanket_refusal_penalty`).

    ## Starting State
    The airline's policy, how to act, the tools and the customer's first message, for the task
    `reset(options={"task_index": i})` picks (default: drawn from the seed). `info` names it
    (`task_id`: `<split>/<index>`).

    ## Episode End
    - Termination: the customer ends the conversation (`###STOP###`), or the agent calls
      `transfer_to_human_agents`.
    - Truncation: after `max_turns` steps (default 30), with reward 0, as the benchmark's step limit.

    ## Arguments
    `data_dir` (without it the env describes itself but cannot start an episode), `split` ("test"),
    `user` ("scripted"), `user_turns`, `user_model`, `user_base_url`, `user_api_key`,
    `user_temperature` (0.0), `user_seed` (0), `strict_refusals` (False), `wrong_refusal_penalty`
    (0.0, needs `strict_refusals`), `max_turns` (30), `render_mode`.
    """

    default_max_turns = 30
    fork_by_copy = True
    fork_shared = frozenset({"data", "task", "_db", "desk", "tools", "_specs"})
    operator_kwargs = frozenset({"data_dir", "user_base_url", "user_api_key"})

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        split: str = "test",
        user: str = "scripted",
        user_turns: list[str] | None = None,
        user_model: str | None = None,
        user_base_url: str | None = None,
        user_api_key: str | None = None,
        user_temperature: float = 0.0,
        user_seed: int | None = 0,
        strict_refusals: bool = False,
        wrong_refusal_penalty: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if user not in ("scripted", "llm"):
            raise ValueError(f"user must be 'scripted' or 'llm', not {user!r}")
        if user == "llm" and (not user_model or not user_base_url):
            raise ValueError("user='llm' needs user_model and user_base_url (an OpenAI-compatible endpoint)")
        # without a data_dir the env can describe itself (spaces, tools: what a server lists) but
        # not start an episode
        self.data: AirlineData | None = load(data_dir, split) if data_dir is not None else None
        self.user_kind = user
        self.user_turns = list(user_turns) if user_turns is not None else None
        self.user_model, self.user_base_url, self.user_api_key = user_model, user_base_url, user_api_key
        self.user_temperature, self.user_seed = user_temperature, user_seed
        if wrong_refusal_penalty and not strict_refusals:
            raise ValueError("wrong_refusal_penalty needs strict_refusals=True")
        if not 0 <= wrong_refusal_penalty < float("inf"):
            raise ValueError(f"wrong_refusal_penalty must be a number >= 0, not {wrong_refusal_penalty!r}")
        self.strict_refusals, self.wrong_refusal_penalty = strict_refusals, float(wrong_refusal_penalty)
        self._db: EpisodeDatabase | None = None
        layout = self.data.layout if self.data is not None else "tau-bench"
        # the tools this data's benchmark offers (the class lists both benchmarks' tools)
        self.tools: dict[str, Tool] = {name: type(self).tools[name] for name in layout_tools(layout)}
        self._specs = self._layout_specs(layout)

    @classmethod
    def _layout_specs(cls, layout: str) -> list[dict[str, Any]]:
        """The tool specs of a layout, built once per class and layout (read-only, like `tool_specs`)."""
        cache = cls.__dict__.get("_specs_by_layout")
        if cache is None:
            cache = cls._specs_by_layout = {}
        if layout not in cache:
            names = layout_tools(layout)
            cache[layout] = [spec for spec in cls.tool_specs() if spec["function"]["name"] in names]
        return cache[layout]

    def _trace_tools(self) -> list[dict[str, Any]]:
        return self._specs

    # --- episode ------------------------------------------------------------------------------
    def _make_user(self, options: dict[str, Any]) -> ScriptedUser | LLMUser:
        if self.user_kind == "llm":
            # reset and __init__ check these
            assert self.data is not None and self.user_base_url and self.user_model
            guidelines = self.data.user_guidelines or DEFAULT_GUIDELINES
            return LLMUser(self.user_base_url, self.user_model, guidelines, self.user_temperature,
                           self.user_seed, self.user_api_key)
        turns = options.get("user_turns", self.user_turns)
        if turns is None:
            turns = [self.task.instruction]
        if not isinstance(turns, list) or not all(isinstance(t, str) for t in turns):
            raise ValueError("user_turns must be a list of strings")
        return ScriptedUser(list(turns))

    def _reset_world(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if self.data is None:
            raise ValueError("data_dir is required: the folder of τ-bench's airline domain "
                             "(tau_bench/envs/airline in a tau-bench checkout); nothing is downloaded")
        tasks = self.data.tasks
        index = options.get("task_index")
        if index is None:
            index = int(self.np_random.integers(len(tasks)))
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(tasks):
            raise ValueError(f"task_index must be an integer in [0, {len(tasks)}), not {index!r}")
        self.task = tasks[index]
        if self._db is not None:
            self._db.close()
        self._db = EpisodeDatabase(template_image(self.data))
        self.desk = new_desk(self.data, self._db.session)
        self.user = self._make_user(options)
        self.agent_calls: list[tuple[str, Any]] = []
        self.looked_up: list[tuple[str, Any]] = []  # the calls answered without error (a grounding)
        self._calling = False
        self.said: list[str] = []
        self._changed: dict[str, dict[str, Any]] = {}  # every row changed so far, as it is now
        self.transferred = False
        self.summaries = []  # what each hand-off told the human agent
        self.reward_info: dict[str, Any] | None = None
        text = (
            f"# Airline policy\n{self.data.policy.strip()}\n\n# How to act\nYou are the airline's agent. "
            "To call tools, write tool calls; to speak to the customer, write a message with no tool call: "
            "the customer's reply comes back as the next message."
        )
        info = {"task_id": f"{self.data.split}/{index}", "task_index": index, "user": self.user.settings()}
        if self.task.task_id is not None:
            info["benchmark_task_id"] = self.task.task_id
        return text, info

    def _begin(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        observation, info = super()._begin(options)
        opening = self.user.opening(self.task.instruction)
        return f"{observation}\n\n# Customer\n{opening}", info

    def _act(self, action: str) -> StepResult:
        if parse_tool_calls(action, self.max_calls_per_turn):
            self._calling = True  # a hand-off ends the episode inside: its reward sees this step's calls
            try:
                result = super()._act(action)
            finally:
                self._calling = False
            self.agent_calls += [(c["name"], c["arguments"]) for c in self._step_calls if c.get("name")]
            self.looked_up += [(c["name"], c["arguments"]) for c in self._step_calls if c.get("ok")]
            return result
        message = utf8_safe(action).strip()  # what the customer reads and the state keeps: valid text
        if not message:
            return StepResult("Empty message: write a message to the customer, or tool calls.", 0.0, False,
                              False, {"calls": [], "invalid_calls": 0})
        self.said.append(message)
        reply = self.user.reply(message)
        self._show(reply)  # what the customer answered is known from here on: part of the state
        self._step_calls.append(call_record(RESPOND, {"content": message}, True, reply))
        over = STOP in reply
        reward = self._final_reward() if over else 0.0
        info: dict[str, Any] = {"calls": [], "invalid_calls": 0, "source": "user"}
        if over:
            info["reward_info"] = self.reward_info
        return StepResult(reply, reward, over, False, info)

    def _reward_on_truncation(self) -> float:
        """Nothing: the benchmark scores a conversation only once it ends (its step limit pays 0)."""
        return 0.0

    def _step_info(self) -> dict[str, Any]:
        return {"reward_info": self.reward_info} if getattr(self, "reward_info", None) else {}

    def _final_reward(self) -> float:
        assert self._db is not None and self.data is not None, "a reward of an episode that was reset"
        state = state_key(self._db.session)
        gold = gold_state(self.data, self.task)
        answers = [m for m in self.said if len(_NUMBER.findall(m)) <= MAX_NUMBERS_PER_MESSAGE]
        if self.strict_refusals:
            outputs = {o: said_whole(o, answers) for o in self.task.outputs}
        else:
            flat = [m.lower().replace(",", "") for m in answers]
            outputs = {o: any(o.lower() in m for m in flat) for o in self.task.outputs}
        info: dict[str, Any] = {"r_actions": state == gold, "outputs": outputs}
        basis = self.task.reward_basis
        reward = float((info["r_actions"] or "DB" not in basis)
                       and (all(outputs.values()) or "COMMUNICATE" not in basis))
        now = self._step_calls if self._calling else []  # the calls of the step still running
        agent_calls = self.agent_calls + [(c["name"], c["arguments"]) for c in now if c.get("name")]
        looked_up = self.looked_up + [(c["name"], c["arguments"]) for c in now if c.get("ok")]
        if "ACTION" in basis:
            matched = [any(self._matches(action, name, args) for name, args in agent_calls)
                       for action in self.task.actions]
            info["actions_matched"] = matched
            reward *= float(all(matched))
        if self.strict_refusals:
            reward = self._strict(reward, gold, looked_up, info)
        self.reward_info = info
        return reward

    def _strict(self, reward: float, gold: str, looked_up: list[tuple[str, Any]],
                info: dict[str, Any]) -> float:
        """`strict_refusals`: on a refusal or hand-off task, the refusal stated, grounded (see
        `_grounded`) and reasoned (it names the rules that forbid the request and no other, see
        `agentrl.tau_airline.strict`); on any other task, `wrong_refusal_penalty` taken from an
        episode that failed and ended on a refusal or a hand-off."""
        assert self.data is not None, "a reward of an episode that was reset"
        refused = self.transferred or bool(self.said and _REFUSAL.search(self.said[-1]))
        if self.task.outputs or gold != initial_state(self.data):
            if reward == 0.0 and refused and self.wrong_refusal_penalty > 0:
                info["wrong_refusal"] = True
                return -self.wrong_refusal_penalty
            return reward
        if any(a.name == TRANSFER for a in self.task.actions):
            stated = self.transferred
        else:
            stated = not self.transferred and any(_REFUSAL.search(m) for m in self.said)
        grounded = self._grounded(looked_up)
        forbidding = forbidding_rules(self.data, self.task)
        named = named_rules([*self.said, *self.summaries])
        reasoned = rules_ok(named, forbidding)
        info.update(refusal_stated=stated, refusal_grounded=grounded, refusal_reasoned=reasoned,
                    rules_named=sorted(named), rules_forbidding=sorted(forbidding))
        return reward * float(stated and grounded and reasoned)

    def _grounded(self, looked_up: list[tuple[str, Any]]) -> bool:
        """Whether the agent read what a refusal or hand-off of this task is a judgement about: the
        look-ups the gold makes; where the gold makes none (the benchmark lists no look-ups for
        most of its refusals), the customer's profile and one of the customer's reservations, as
        the policy asks of every change or cancellation (user id and reservation id first)."""
        assert self.data is not None, "a reward of an episode that was reset"
        needed = [a for a in self.task.actions if a.name not in UNGROUNDING]
        if needed:
            return all(any(self._matches(action, name, args) for name, args in looked_up)
                       for action in needed)
        user = self.task.user_id
        own = set(self.data.users.get(user, {}).get("reservations", ()))
        read = {name: [args for n, args in looked_up if n == name and isinstance(args, dict)]
                for name in ("get_user_details", "get_reservation_details")}
        return (any(args.get("user_id") == user for args in read["get_user_details"])
                and any(args.get("reservation_id") in own for args in read["get_reservation_details"]))

    @staticmethod
    def _matches(action: Any, name: str, arguments: Any) -> bool:
        """τ²-bench's `Action.compare_with_tool_call`: the same tool, and equal values for the
        action's `compare_args` (all the call's arguments when None)."""
        if action.name != name or not isinstance(arguments, dict):
            return False
        keys = arguments.keys() if action.compare_args is None else action.compare_args
        return ({k: v for k, v in arguments.items() if k in keys}
                == {k: v for k, v in action.kwargs.items() if k in keys})

    def _state_change(self) -> dict[str, Any] | None:
        if not self.desk.touched:
            return None
        assert self._db is not None, "a desk touched in an episode that was reset"
        session = self._db.session
        session.flush()
        change: dict[str, dict[str, Any]] = {}
        for table, key in sorted(self.desk.touched):
            if table == "users":
                user = session.get(User, key)
                doc = None if user is None else user_json(session, user)
            else:
                reservation = session.get(Reservation, key)
                doc = None if reservation is None else reservation_json(session, reservation)
            change.setdefault(table, {})[key] = doc
        self.desk.touched.clear()
        for table, docs in change.items():
            self._changed.setdefault(table, {}).update(docs)
        return change

    def _world_state(self) -> dict[str, Any]:
        """The rows changed so far and what the agent told the customer (the reward reads both)."""
        return {"changed": self._changed, "said": self.said}

    def _trace_meta(self) -> dict[str, Any]:
        return {"user": self.user.settings(), "strict_refusals": self.strict_refusals,
                "wrong_refusal_penalty": self.wrong_refusal_penalty}

    def _fork_resources(self, child: TauAirlineEnv) -> None:
        assert self.data is not None and self._db is not None, "a fork of an episode that has data"
        child._db = self._db.copy()
        child.desk = new_desk(self.data, child._db.session)
        child.desk.touched = set(self.desk.touched)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        super().close()
