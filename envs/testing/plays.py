"""How the contract plays each env: a `Play` per env id, and `register` to add one.

A play is what the env's own tests know and the contract does not: a few actions that make a real
episode (the env's oracle where it has one), the constructor arguments that make it small, and,
for `state_hash`, two routes to one state and two routes to different states. The actions may be a
function of the env just reset: it reads the task from the env (or its latest observation, which
`env.messages[-1]` holds) and yields one action at a time.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from agentrl.core.parsing import tool_call
from agentrl.registration import register_env

# actions from a reset: a list, or what yields them given the env just reset (its task, its messages)
Actions = Sequence[str] | Callable[[Any], Iterable[str]]
# two action lists played from one seed's reset, or what gives them given the env just reset
Routes = tuple[Sequence[str], Sequence[str]] | Callable[[Any], tuple[Sequence[str], Sequence[str]]]


@dataclass(frozen=True)
class Play:
    """How the contract plays one env id.

    `actions` are played from `reset(seed=s)` for each seed in `seeds`, at most `max_steps` of them.
    `same_state`: two routes from `reset(seed=seeds[0])` that reach one state (equal `state_hash`);
    `other_state`: two routes that reach different states. `requires` says why the env cannot be
    built here (no Docker engine, no data), or None when it can; the contract does not run then.
    """

    actions: Actions = ()
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    seeds: tuple[int, ...] = (0, 1, 2)
    max_steps: int = 12
    same_state: Routes | None = None
    other_state: Routes | None = None
    requires: Callable[[Mapping[str, Any]], str | None] | None = None


def latest_observation(env: Any) -> str:
    return env.messages[-1]["content"]


# --- the envs' oracles and routes -------------------------------------------------------------
def echo_oracle(env: Any) -> Iterator[str]:
    yield tool_call("echo", text="hello")
    secret = re.search(r"word '(\w+)'", env.messages[0]["content"])
    yield tool_call("finish", answer=secret.group(1) if secret else "")


def flights_oracle(env: Any) -> Iterator[str]:
    from agentrl.flights.oracle import OraclePolicy

    policy = OraclePolicy()
    while True:
        yield policy(latest_observation(env), {})


def flights_routes(env: Any) -> tuple[list[str], list[str]]:
    """Two searches in either order, then the last one again (filters and pages read the last)."""
    origin, destination, day = env.task.route
    there = tool_call("search_flights", origin=origin, destination=destination, date=day)
    back = tool_call("search_flights", origin=destination, destination=origin, date=day)
    return [there, back, back], [back, there, back]


def flights_other_routes(env: Any) -> tuple[list[str], list[str]]:
    there, back, _ = flights_routes(env)[0]
    return [there], [back]


def search_oracle(env: Any) -> Iterator[str]:
    """Search each gold evidence title, then give the gold answer."""
    for title in env.question.evidence:
        yield f"<think>I need {title}.</think><search>{title}</search>"
    yield f"<answer>{env.question.answers[0]}</answer>"


def tau_oracle(env: Any) -> list[str]:
    from agentrl.tau_airline.env import gold_actions

    return gold_actions(env.task)


def tau_routes(env: Any) -> tuple[list[str], list[str]]:
    user, flights = tool_call("get_user_details", user_id=env.task.user_id), tool_call("list_all_airports")
    return [user, flights], [flights, user]


def sandbox_oracle(env: Any) -> list[str]:
    """The task's reference solution."""
    from agentrl.code_envs.tasks import as_action

    return [as_action(reference) for reference in env.task.solution]


def sandbox_routes(env: Any) -> tuple[list[str], list[str]]:
    first, second = (tool_call("execute_bash", command=f"echo {word}") for word in ("one", "two"))
    return [first, second], [second, first]


def sandbox_other_routes(env: Any) -> tuple[list[str], list[str]]:
    written = tool_call("write_file", path="new.txt", content="x")
    return [tool_call("execute_bash", command="echo one")], [written]


def needs_data_dir(env_kwargs: Mapping[str, Any]) -> str | None:
    if env_kwargs.get("data_dir"):
        return None
    return "TauAirline-v0 plays tau-bench's airline data: pass env_kwargs={'data_dir': <its folder>}"


def needs_docker(env_kwargs: Mapping[str, Any]) -> str | None:
    """Why the sandbox envs cannot run here: no Docker SDK, engine or sandbox image (None: they can)."""
    if env_kwargs.get("sandbox_url"):
        return None  # a sandbox server runs the containers
    from agentrl.sandbox_server.wire.models import DEFAULT_IMAGE

    try:
        import docker

        engine = docker.from_env(timeout=10)
    except Exception as exc:  # the SDK is missing, or no engine answers
        return f"no Docker engine: {type(exc).__name__}: {exc}"
    try:
        engine.images.get(env_kwargs.get("image") or DEFAULT_IMAGE)
    except Exception as exc:
        return f"the sandbox image is missing (bash docker/engine.sh): {type(exc).__name__}: {exc}"
    finally:
        engine.close()
    return None


ECHO_A, ECHO_B = tool_call("echo", text="a"), tool_call("echo", text="b")
# containers cost about a second each: two seeds, a short command timeout
SANDBOX_PLAY = Play(sandbox_oracle, env_kwargs={"command_timeout_s": 5.0, "pool_size": 2}, seeds=(0, 1),
                    same_state=sandbox_routes, other_state=sandbox_other_routes, requires=needs_docker)

PLAYS: dict[str, Play] = {
    "agentrl/Echo-v0": Play(echo_oracle, same_state=([ECHO_A, ECHO_B], [ECHO_B, ECHO_A]),
                            other_state=([ECHO_A], [ECHO_B])),
    "agentrl/Flights-v0": Play(flights_oracle, same_state=flights_routes, other_state=flights_other_routes),
    "agentrl/Search-v0": Play(
        search_oracle, env_kwargs={"world_seed": 7, "world_passages": 600},
        same_state=(["<search>born in</search>", "<search>founded</search>"],
                    ["<search>founded</search>", "<search>born in</search>"]),
        other_state=(["<search>born in</search>"], ["<search>founded</search>"]),
    ),
    "agentrl/TauAirline-v0": Play(tau_oracle, same_state=tau_routes, requires=needs_data_dir),
    "agentrl/Bash-v0": SANDBOX_PLAY,
    "agentrl/Code-v0": SANDBOX_PLAY,
}


def register(env_id: str, play: Play, *, env: type[gym.Env] | str | None = None) -> None:
    """Put `env_id` under the contract with `play`; with `env` (its class, or "module:Class"),
    also register the env itself (`agentrl.registration.register_env`): with Gymnasium, and served
    by `agentrl serve`. One line, and the contract suite plays the new env."""
    if env is not None:
        register_env(env_id, env)
    PLAYS[env_id] = play
