"""An episode as a structured record: every step's action, parsed calls, results and state change.

The record is the one account of an episode an env keeps; everything else that shows an episode
is a view of it, computed when asked for, so that no second list has to be kept in step with it:
the chat messages (`env.messages`, `transcript`), the server's trajectory route, SFT lines
(`agent-train sft` reads records; `agentrl demo --sft` converts them) and the demo's summary.
Besides the text a model saw, a record keeps what the text alone loses: which tools were called
with which arguments, what each returned, the reward and flags of every step, the rows each step
changed in the world, and the forks taken from the episode, so that it is a tree, not a line.
`record` builds the JSON-serialisable record (`agentrl.trajectory/1`); `transcript` turns a whole
record back into the messages.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

TRAJECTORY_FORMAT = "agentrl.trajectory/1"


def call_record(name: str | None, arguments: dict[str, Any] | None, ok: bool, result: str) -> dict[str, Any]:
    """One parsed call of a step: the tool's name and raw arguments (None when the call could not be
    read), whether it succeeded, and its result as the model saw it."""
    return {"name": name, "arguments": arguments, "ok": ok, "result": result}


class StateChange(Protocol):
    """A step's change of the world kept as the env read it, decoded only when a record is built: a
    step must stay cheap, and decoding (JSON rows, for Flights-v0) costs more than reading."""

    def decode(self) -> dict[str, Any]: ...


@dataclass
class Trace:
    """The record of one episode as it grows: the header at reset, then one dict per step.

    It is also what replaying the episode into a fork needs (`fork.replay_env`): the reset's seed,
    options and the generator's state before the world was built, then each action as the env
    received it (`replay_actions`); those stay out of the record. Step dicts are never changed
    once added, so a fork shares them with its parent (`copy`)."""

    env_id: str | None
    task_id: str | None
    seed: int | None
    observation: str
    tools: list[dict[str, Any]]
    steps: list[dict[str, Any]] = field(default_factory=list)
    # what else produced the episode besides the env's arguments (a simulated user's model and
    # sampling settings); a record carries it as `meta` when there is any
    meta: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)  # the reset's options
    rng_state: dict[str, Any] = field(default_factory=dict)  # the generator's, before the world was built
    # the actions whose recorded text is not what the env received (not text, or not valid UTF-8),
    # by step index: a replay must feed the env the very same input
    received: dict[int, Any] = field(default_factory=dict)

    def add(
        self,
        received: Any,
        action: str,
        calls: list[dict[str, Any]],
        observation: str,
        reward: float,
        terminated: bool,
        truncated: bool,
        state_change: dict[str, Any] | StateChange | None,
    ) -> None:
        if not (isinstance(received, str) and received == action):
            self.received[len(self.steps)] = received
        self.steps.append(
            {
                "action": action,
                "calls": calls,
                "observation": observation,
                "reward": float(reward),
                "terminated": bool(terminated),
                "truncated": bool(truncated),
                "state_change": state_change,
            }
        )

    def messages(self) -> list[dict[str, str]]:
        """The chat so far, as `env.messages` shows it (see `transcript`)."""
        return chat_messages(self.observation, self.steps)

    def replay_actions(self) -> list[Any]:
        """Every action as the env received it, in order."""
        return [self.received.get(i, step["action"]) for i, step in enumerate(self.steps)]

    def copy(self) -> Trace:
        return Trace(self.env_id, self.task_id, self.seed, self.observation, self.tools, list(self.steps),
                     self.meta, self.options, self.rng_state, dict(self.received))


class Traced(Protocol):
    """What `record` reads from an env (and from each of its forks)."""

    _trace: Trace | None
    _forks: list[tuple[int, Any]]


def record(env: Traced, since: int = 0) -> dict[str, Any]:
    """The env's episode as an `agentrl.trajectory/1` record, with its forks as children.

    `since` drops the first steps: a fork's record inside its parent's holds only the steps after
    the fork (`at_step`, counted from the episode's start, is where they begin)."""
    trace = env._trace
    if trace is None:
        raise RuntimeError("no episode to record: call reset() first")
    out = {
        "format": TRAJECTORY_FORMAT,
        "env_id": trace.env_id,
        "task_id": trace.task_id,
        "seed": trace.seed,
        "observation": trace.observation,
        "tools": copy.deepcopy(trace.tools),
        "steps": [_step_record(step) for step in trace.steps[since:]],
        "forks": [{"at_step": k, "trajectory": record(child, since=k)} for k, child in env._forks],
    }
    if trace.meta:
        out["meta"] = copy.deepcopy(trace.meta)
    return out


def _step_record(step: dict[str, Any]) -> dict[str, Any]:
    change = step["state_change"]
    out = copy.deepcopy({**step, "state_change": None})
    if change is not None:
        out["state_change"] = copy.deepcopy(change) if isinstance(change, dict) else change.decode()
    return out


def transcript(trajectory: dict[str, Any]) -> list[dict[str, str]]:
    """The chat messages of a whole record (not a fork's part): the first observation, then each
    step's action and observation, as `env.messages` holds them."""
    return chat_messages(trajectory["observation"], trajectory["steps"])


def chat_messages(observation: str, steps: Iterable[dict[str, Any]]) -> list[dict[str, str]]:
    """The first observation as a user turn, then each step's action (assistant) and observation (user)."""
    messages = [{"role": "user", "content": observation}]
    for step in steps:
        messages.append({"role": "assistant", "content": step["action"]})
        messages.append({"role": "user", "content": step["observation"]})
    return messages
