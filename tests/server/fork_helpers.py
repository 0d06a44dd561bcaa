"""What the fork tests over HTTP share (a uniquely named module): per env, a policy to play, the
step to fork at and a detour for a second fork, and the one check every env goes through."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentrl.client import EnvClient
from agentrl.core import StepResult
from agentrl.core import tool_call as call  # noqa: F401  (the one way to write a call, for the tests that import it here)

Policy = Callable[[str, dict[str, Any]], str]


@dataclass(frozen=True)
class Case:
    """One env's fork scenario: `policy()` makes a fresh policy that plays a whole episode; the
    parent is forked after `fork_at` of its steps, and one fork takes `detour` instead."""

    env_id: str
    seed: int
    fork_at: int
    policy: Callable[[], Policy]
    detour: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] | None = None


def scripted(script: Callable[[dict[str, Any]], list[str]]) -> Callable[[], Policy]:
    """A policy factory playing `script(first info)` action by action."""

    def make() -> Policy:
        actions: list[str] = []

        def act(observation: str, info: dict[str, Any]) -> str:
            if not actions:
                actions.extend(reversed(script(info)))
            return actions.pop()

        return act

    return make


def play_and_fork(client: EnvClient, case: Case) -> dict[str, Any]:
    """Play `case` over HTTP with two forks at `fork_at`; check determinism and isolation.

    Fork `other` takes the detour first; then the parent plays on to the end; then fork `same`
    replays the parent's later actions and must get the parent's results exactly; and a fresh
    episode with the same seed replaying every action must too (so neither the fork nor the
    detour moved the parent). Returns what the callers check further.
    """
    first = client.create_episode(case.env_id, seed=case.seed, options=case.options,
                                  env_kwargs=case.env_kwargs)
    parent = first.episode_id
    policy = case.policy()
    observation, info = first.observation, first.info
    actions: list[str] = []
    results: list[StepResult] = []

    def advance() -> StepResult:
        nonlocal observation, info
        action = policy(observation, info)
        result = client.step(parent, action)
        actions.append(action)
        results.append(result)
        observation, info = result.observation, result.info
        return result

    for _ in range(case.fork_at):
        result = advance()
        assert not (result.terminated or result.truncated), "the episode ended before the fork"
    same, other = client.fork_episode(parent, 2)
    for made in (same, other):
        assert made.parent_id == parent and made.env_id == case.env_id and made.turns == case.fork_at
        assert made.episode_id.split(".")[0] == parent.split(".")[0]  # held here, named so
        assert made.observation == observation and made.info == info
    assert same.episode_id != other.episode_id
    detour = client.step(other.episode_id, case.detour)
    while not (results[-1].terminated or results[-1].truncated):
        advance()
    later = actions[case.fork_at:]
    assert [client.step(same.episode_id, a) for a in later] == results[case.fork_at:]
    assert detour != results[case.fork_at]
    reference = client.create_episode(case.env_id, seed=case.seed, options=case.options,
                                      env_kwargs=case.env_kwargs)
    assert reference.observation == first.observation and reference.info == first.info
    assert [client.step(reference.episode_id, a) for a in actions] == results
    client.close_episode(reference.episode_id)
    return {"parent": parent, "same": same.episode_id, "other": other.episode_id, "actions": actions,
            "results": results, "detour": detour, "first": first}


def check_record(client: EnvClient, case: Case, played: dict[str, Any]) -> None:
    """The parent's trajectory record holds its steps, and both forks as children at `fork_at`."""
    record = client.trajectory(played["parent"])
    assert json.loads(json.dumps(record)) == record
    assert record["format"] == "agentrl.trajectory/1" and record["seed"] == case.seed
    first = played["first"]
    assert record["env_id"] == case.env_id and record["task_id"] == first.info.get("task_id")
    assert record["observation"] == first.observation
    steps = record["steps"]
    assert [s["action"] for s in steps] == played["actions"]
    assert [s["observation"] for s in steps] == [r.observation for r in played["results"]]
    assert [s["reward"] for s in steps] == [r.reward for r in played["results"]]
    later = played["actions"][case.fork_at:]
    children = sorted(([s["action"] for s in f["trajectory"]["steps"]], f["at_step"])
                      for f in record["forks"])
    assert children == sorted([(later, case.fork_at), ([case.detour], case.fork_at)])
    # each fork's own record ends with the steps it took itself
    for eid, took in ((played["same"], later), (played["other"], [case.detour])):
        own = [s["action"] for s in client.trajectory(eid)["steps"]]
        assert own[len(own) - len(took):] == took
