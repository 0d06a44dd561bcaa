"""The env contract (`agentrl.testing`) on every registered env, on a toy env that needs only its class
and one registration line, and on toy envs that break it, each in its own way.

Each env plays by its `Play`: few seeds, few steps, one loopback server per env. Bash-v0 / Code-v0
need the Docker engine and the sandbox image, TauAirline-v0 the airline data the tau tests use.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from pydantic import BaseModel, Field
from support import unavailable

import agentrl  # noqa: F401  (registers the ids)
from agentrl.core import ToolEnv, tool, tool_call
from agentrl.registration import ENV_ENTRY_POINTS
from agentrl.testing import PLAYS, ContractBroken, ContractUnavailable, Play, check_contract, register

TAU_DATA = Path(__file__).parents[1] / "tau_airline" / "data"
ENV_KWARGS = {"agentrl/TauAirline-v0": {"data_dir": str(TAU_DATA)}}


# MCP-v0 plays the tests' notebook server (tests/mcp/servers) in process isolation
def mcp_oracle(env):
    calls = [tool_call(c["name"], **c["arguments"]) for c in env.task.oracle]
    return [*calls, tool_call("finish", answer=env.task.answer)]


def needs_mcp(env_kwargs):
    try:
        import mcp  # noqa: F401
    except ImportError:
        return "MCP-v0 needs the MCP SDK (the [mcp] extra)"
    return None


MCP_NOTEBOOK = Path(__file__).parents[1] / "mcp" / "servers" / "notebook.py"
MCP_TASKS = [{"id": f"notes-{n}", "split": "train", "prompt": f"Store b={n}, then answer note a.",
              "setup": {"files": {"notebook.json": '{"a": "1"}'}},
              "checks": {"answer": "1",
                         "state": [{"name": "get", "arguments": {"key": "b"}, "contains": [str(n)]}]},
              "oracle": [{"name": "put", "arguments": {"key": "b", "value": str(n)}},
                         {"name": "get", "arguments": {"key": "a"}}]} for n in range(2)]
PUT_X, PUT_Y = tool_call("put", key="x", value="1"), tool_call("put", key="y", value="2")
PLAYS["agentrl/MCP-v0"] = Play(
    mcp_oracle, seeds=(0,), same_state=([PUT_X, PUT_Y], [PUT_Y, PUT_X]), other_state=([PUT_X], [PUT_Y]),
    requires=needs_mcp,
    env_kwargs={"server": [sys.executable, str(MCP_NOTEBOOK), "--dir", "{workspace}"], "tasks": MCP_TASKS,
                "isolation": "process", "pool_size": 0},
)


class AddArgs(BaseModel):
    n: int = Field(ge=0, le=100, description="How much to add.")


class CounterEnv(ToolEnv):
    """Add up to the seeded target, then finish: reward 1 when the total is the target."""

    fork_by_copy = True

    def _reset_world(self, options):
        self.target = int(self.np_random.integers(5, 50))
        self.total = 0
        return f"Add numbers until the total is {self.target}, then finish.", {}

    @tool("Add n to the total.")
    def add(self, args: AddArgs) -> str:
        self.total += args.n
        return f"total {self.total}"

    @tool("Show the target.")
    def show_target(self) -> str:
        return f"target {self.target}"

    @tool("Stop.", ends_episode=True)
    def finish(self) -> str:
        return "done"

    def _final_reward(self) -> float:
        return float(self.total == self.target)

    def _world_state(self) -> int:
        return self.total


ADD_2, ADD_3, TARGET = tool_call("add", n=2), tool_call("add", n=3), tool_call("show_target")
# same state: the same facts shown, in either order; other state: another total
COUNTER = Play([ADD_2, ADD_3, tool_call("finish")], same_state=([TARGET, ADD_2], [ADD_2, TARGET]),
               other_state=([ADD_2], [ADD_3]))


@pytest.fixture
def toy_ids():
    """Remove the toy envs a test registers once it is done: a server of another test serves every
    registered id, and must not meet them."""
    before = dict(ENV_ENTRY_POINTS), dict(PLAYS), set(gym.registry)
    yield
    for env_id in set(gym.registry) - before[2]:
        del gym.registry[env_id]
    for now, then in zip((ENV_ENTRY_POINTS, PLAYS), before[:2], strict=True):
        now.clear()
        now.update(then)


@pytest.mark.parametrize("env_id", sorted(PLAYS))
def test_every_registered_env_keeps_the_contract(env_id):
    try:
        report = check_contract(env_id, ENV_KWARGS.get(env_id))
    except ContractUnavailable as exc:
        unavailable(str(exc))
    assert [episode.seed for episode in report.episodes] == list(PLAYS[env_id].seeds)
    assert all(episode.actions for episode in report.episodes)


def test_every_env_id_is_under_the_contract():
    assert set(ENV_ENTRY_POINTS) <= set(PLAYS), "an env registered without a Play: add its line to PLAYS"


def test_a_new_env_needs_its_class_and_one_line(toy_ids):
    register("test/Counter-v0", COUNTER, env=CounterEnv)  # the one line
    assert ENV_ENTRY_POINTS["test/Counter-v0"] == f"{CounterEnv.__module__}:CounterEnv"
    report = check_contract("test/Counter-v0")
    # each seed played to its end: add, add, finish (terminated)
    assert [(len(episode.actions), episode.steps[-1][2]) for episode in report.episodes] == [(3, True)] * 3


class NoisyEnv(CounterEnv):
    """Draws its target from the process's random module, not the env's seeded generator."""

    def _reset_world(self, options):
        observation, info = super()._reset_world(options)
        self.target = random.randrange(5, 10**9)
        return f"Add numbers until the total is {self.target}, then finish.", info


class FragileEnv(CounterEnv):
    """Raises on text that is not a tool call, instead of answering it."""

    def _act(self, action):
        if "<tool_call>" not in action:
            raise ValueError(f"cannot read {action[:20]!r}")
        return super()._act(action)


class SharingEnv(CounterEnv):
    """Keeps its total in a list it declares read-only (`fork_shared`): forks share it and drift."""

    fork_shared = frozenset({"tally"})

    def _reset_world(self, options):
        self.tally = [0]
        return super()._reset_world(options)

    @tool("Add n to the total.")
    def add(self, args: AddArgs) -> str:
        self.tally[0] += args.n
        return f"total {self.tally[0]}"


class BlindEnv(CounterEnv):
    """Names one state for all: its hash cannot tell two tasks, or two totals, apart."""

    def _state(self) -> str:
        return "always the same"


@pytest.mark.parametrize(
    ("env", "broken", "words"),
    [
        (NoisyEnv, {"check_env", "same_seed", "fork", "http", "state_hash"},
         "a second env, seed 2: the reset differs: observation was 'Add numbers until the total is"),
        (FragileEnv, {"check_env", "junk", "record"},
         "random bytes read as text raised ValueError: cannot read"),
        (SharingEnv, {"fork", "http"}, "fork 1 forked at step 0: step 1 differs: observation was"),
        (BlindEnv, {"state_hash"}, "two resets with different first observations have one state_hash"),
    ],
    ids=lambda value: value.__name__ if isinstance(value, type) else "",
)
def test_an_env_that_breaks_a_promise_fails_the_contract_saying_which(env, broken, words, toy_ids):
    env_id = f"test/{env.__name__}-v0"
    register(env_id, COUNTER, env=env)
    with pytest.raises(ContractBroken) as caught:
        check_contract(env_id)
    assert set(caught.value.broken) == broken, str(caught.value)
    assert words in str(caught.value) and f"{env_id} broke {len(broken)} of" in str(caught.value)
