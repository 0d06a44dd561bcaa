"""SkyRL: `skyrl_gym.make` / `init` / `step` / `close` on an agentrl env served on loopback give what
`RemoteEnv` gives on the same seeds, and `close()` deletes the server-side episode."""

from __future__ import annotations

import pytest
from integrations_helpers import FLIGHTS, counters, replay, require, served, solved_seed

skyrl_gym = require("skyrl_gym")

from omegaconf import DictConfig  # noqa: E402

from agentrl.integrations.skyrl import AgentrlTextEnv, register  # noqa: E402


def play(env: AgentrlTextEnv, actions: list[str]) -> tuple[list[dict], list[tuple]]:
    prompt, _ = env.init([{"role": "system", "content": "You are a travel agent."},
                          {"role": "user", "content": "(replaced by the env's task)"}])
    trace = [(prompt[-1]["content"], 0.0, False)]
    for action in actions:
        out = env.step(action)
        observation = out["observations"][0]["content"] if out["observations"] else None
        trace.append((observation, out["reward"], out["done"]))
        if out["done"]:
            break
    return prompt, trace


def test_make_init_step_close_match_remote_env_and_leave_no_episode():
    register()
    register()  # idempotent
    with served() as url:
        for split in ("train", "test"):
            seed, actions = solved_seed(split)
            # one wrong call first: the env's error observation must match too
            actions = ['<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>', *actions]
            expected = replay(url, FLIGHTS, seed, split, actions)
            before = counters(url)
            env = skyrl_gym.make(FLIGHTS, env_config=DictConfig({"base_url": url}),
                                 extras={"seed": seed, "split": split})
            assert isinstance(env, AgentrlTextEnv)
            prompt, got = play(env, actions)
            assert prompt[0] == {"role": "system", "content": "You are a travel agent."} and len(prompt) == 2
            assert counters(url).live == before.live + 1
            env.close()
            after = counters(url)
            assert after.live == before.live and after.closed == before.closed + 1
            assert [(r, d) for _, r, d in got] == [(r, d) for _, r, d in expected]
            # SkyRL's convention: no observation once done; every earlier one is RemoteEnv's
            assert [o for o, _, d in got if not d] == [o for o, _, d in expected if not d]
            assert sum(r for _, r, _ in got) == 1.0
            assert env.get_metrics()["episode_reward"] == 1.0


def test_in_process_env_and_max_turns_from_the_row():
    register()
    seed, actions = solved_seed("train")
    env = skyrl_gym.make(FLIGHTS, env_config={}, extras={"seed": seed, "split": "train", "max_turns": 1})
    _, got = play(env, actions)
    env.close()
    # the generator's max_turns is the env's: it truncates after one step and says done
    assert len(got) == 2 and got[-1][2] is True
    assert got[0][0] == replay(None, FLIGHTS, seed, "train", [])[0][0]


def test_unknown_config_is_refused():
    register()
    with pytest.raises(ValueError, match="unknown env_config keys"):
        skyrl_gym.make(FLIGHTS, env_config={"base_ur1": "http://127.0.0.1:1"}, extras={})
