"""Shared helpers of the framework-adapter tests (a uniquely named module: pytest puts test folders on
sys.path): the oracle's actions on a Flights-v0 episode, the server's episode counters, replay."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import import_module
from typing import Any

import gymnasium as gym
import httpx
from prometheus_client.parser import text_string_to_metric_families
from support import unavailable

import agentrl  # noqa: F401  (registers the ids)
from agentrl.core import parse_tool_calls
from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread

FLIGHTS = "agentrl/Flights-v0"


def require(module: str) -> Any:
    """Import a framework package, or skip (fail under CI): tests/run installs every extra."""
    try:
        return import_module(module)
    except ImportError as exc:
        unavailable(f"{module} is not installed ({exc}); pip install -e '.[trl,skyrl,verifiers]'")


@contextmanager
def served() -> Iterator[str]:
    """A real `agentrl serve` on a free loopback port, for one test."""
    with serve_in_thread(ServerConfig(max_episodes=64)) as url:
        yield url


@dataclass(frozen=True)
class Counters:
    created: float
    closed: float
    steps: float
    live: int


def counters(url: str) -> Counters:
    """What the server saw, from its own /metrics and /health."""
    samples: dict[str, float] = {}
    text = httpx.get(f"{url}/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_total"):
                samples[sample.name] = samples.get(sample.name, 0.0) + sample.value
    live = int(httpx.get(f"{url}/health").json()["live_episodes"])
    return Counters(samples.get("agentrl_episodes_created_total", 0.0),
                    samples.get("agentrl_episodes_closed_total", 0.0),
                    samples.get("agentrl_steps_total", 0.0), live)


def _oracle_env() -> gym.Env:
    # The oracle reads the task request from info; envs give it only to an operator who asks.
    try:
        return gym.make(FLIGHTS, privileged_info=True)
    except TypeError:
        return gym.make(FLIGHTS)


def oracle_actions(seed: int, split: str = "train") -> tuple[list[str], float]:
    """The oracle's actions on one in-process episode, and the reward it earned."""
    from agentrl.flights.oracle import OraclePolicy

    env, policy = _oracle_env(), OraclePolicy()
    observation, info = env.reset(seed=seed, options={"split": split})
    actions, total, done = [], 0.0, False
    while not done:
        action = policy(observation, info)
        actions.append(action)
        observation, reward, terminated, truncated, info = env.step(action)
        total += reward
        done = terminated or truncated
    env.close()
    return actions, total


@functools.cache
def solved_seed(split: str = "train", first: int = 0) -> tuple[int, tuple[str, ...]]:
    """The first seed from `first` whose oracle episode earns reward 1 with at least two actions
    (cached: several tests play the same episode)."""
    for seed in range(first, first + 50):
        actions, reward = oracle_actions(seed, split)
        if reward == 1.0 and len(actions) >= 2:
            return seed, tuple(actions)
    raise AssertionError("the oracle solved no Flights-v0 task with two or more actions")


def as_call(action: str) -> dict[str, Any]:
    """The single tool call in an action, as {"name", "arguments"}."""
    [call] = parse_tool_calls(action)
    return {"name": call.name, "arguments": call.arguments}


def replay(url: str | None, env_id: str, seed: int, split: str, actions: Sequence[str]) -> list[tuple]:
    """(observation, reward, done) after reset and after each action, on a fresh env (RemoteEnv
    when `url` is set); stops when the env ends the episode."""
    env = gym.make(env_id, base_url=url) if url else gym.make(env_id)
    observation, _ = env.reset(seed=seed, options={"split": split})
    trace = [(observation, 0.0, False)]
    for action in actions:
        observation, reward, terminated, truncated, _ = env.step(action)
        trace.append((observation, reward, terminated or truncated))
        if terminated or truncated:
            break
    env.close()
    return trace


def tool_call_text(call: dict[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps(call) + "\n</tool_call>"
