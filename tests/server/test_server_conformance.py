"""The same seed played in-process and through `RemoteEnv` gives the same transcript, also concurrently."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from server_helpers import ECHO, FLIGHTS, call

from agentrl.client import EnvClient, RemoteEnv
from agentrl.core import TextSpace

Policy = Callable[[str, dict[str, Any]], str]


def random_policy(seed: int) -> Policy:
    """Printable garbage, sometimes wrapped as a tool call: exercises every error path of an env."""
    space = TextSpace(200, seed=seed)
    rng = np.random.default_rng(seed)

    def act(observation: str, info: dict[str, Any]) -> str:
        text = space.sample()
        return call("echo", text=text) if rng.random() < 0.3 else text

    return act


def echo_policy(observation: str, info: dict[str, Any]) -> str:
    secret = info.get("secret")
    if secret is not None:
        echo_policy.secret = secret  # type: ignore[attr-defined]
        return call("echo", text="hello")
    return call("finish", answer=echo_policy.secret)  # type: ignore[attr-defined]


def flights_policy(kind: str, seed: int) -> Policy:
    from agentrl.flights.oracle import OraclePolicy, RandomPolicy

    return OraclePolicy() if kind == "oracle" else RandomPolicy(seed)


def play(env: gym.Env, seed: int, policy: Policy, options: dict[str, Any] | None = None) -> list[Any]:
    observation, info = env.reset(seed=seed, options=options)
    transcript: list[Any] = [(observation, info)]
    done = False
    while not done:
        observation, reward, terminated, truncated, info = env.step(policy(observation, info))
        transcript.append((observation, reward, terminated, truncated, info))
        done = terminated or truncated
    return transcript


def oracle(seed: int) -> Policy:
    return flights_policy("oracle", seed)


CASES = [
    pytest.param(ECHO, {}, lambda s: random_policy(s), id="echo-random"),
    pytest.param(ECHO, {}, lambda s: echo_policy, id="echo-scripted"),
    pytest.param(FLIGHTS, {}, oracle, id="flights-oracle"),
    pytest.param(FLIGHTS, {"stochastic": True}, oracle, id="flights-stochastic"),
    pytest.param(FLIGHTS, {}, lambda s: flights_policy("random", s), id="flights-random"),
]


@pytest.mark.parametrize(("env_id", "kwargs", "make_policy"), CASES)
def test_remote_transcript_equals_local(base_url, env_id, kwargs, make_policy):
    local = gym.make(env_id, **kwargs)
    remote = gym.make(env_id, base_url=base_url, **kwargs)
    assert isinstance(remote.unwrapped, RemoteEnv)
    assert remote.action_space == local.action_space and remote.observation_space == local.observation_space
    for seed in (0, 7):
        expected = play(local, seed, make_policy(seed))
        got = play(remote, seed, make_policy(seed))
        assert got == expected
    # reset without a seed continues the env's RNG, remotely as locally
    assert remote.reset()[1] == local.reset()[1]
    local.close()
    remote.close()


@pytest.mark.parametrize("env_id", [ECHO, FLIGHTS])
def test_render_matches_local(base_url, env_id):
    local = gym.make(env_id, render_mode="ansi")
    remote = gym.make(env_id, base_url=base_url, render_mode="ansi")
    for env in (local, remote):
        env.reset(seed=3)
        env.step(call("nothing_here"))
    assert remote.render() == local.render()
    local.close()
    remote.close()


@pytest.mark.parametrize(
    ("env_id", "make_policy"),
    [(ECHO, random_policy), (FLIGHTS, oracle)],
)
def test_concurrent_episodes_never_see_each_other(base_url, env_id, make_policy):
    """Sixteen episodes interleaved on one server each replay exactly as alone, in-process."""
    seeds = list(range(100, 116))
    local = gym.make(env_id)
    expected = {seed: play(local, seed, make_policy(seed)) for seed in seeds}
    local.close()
    client = EnvClient(base_url)

    def remote_play(seed: int) -> list[Any]:
        env = RemoteEnv(env_id, base_url=base_url, client=client)
        try:
            return play(env, seed, make_policy(seed))
        finally:
            env.close()

    with ThreadPoolExecutor(max_workers=8) as pool:
        got = dict(zip(seeds, pool.map(remote_play, seeds), strict=True))
    client.close()
    for seed in seeds:
        assert got[seed] == expected[seed], f"seed {seed} differs"
