"""The ToolEnv machinery, exercised through Echo-v0 (the smallest real env)."""

from __future__ import annotations

import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

import agentrl
from agentrl.core import EpisodeOverError, TextSpace
from agentrl.core import tool_call as call


def test_registered_ids_make_both_ways():
    assert "agentrl/Echo-v0" in agentrl.ENV_IDS
    assert gym.make("agentrl/Echo-v0").unwrapped.__class__.__name__ == "EchoEnv"
    assert gym.make("agentrl:agentrl/Echo-v0").unwrapped.__class__.__name__ == "EchoEnv"


def test_check_env_passes_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make("agentrl/Echo-v0").unwrapped)


def test_reset_lists_tools_in_info_and_observation():
    env = gym.make("agentrl/Echo-v0")
    obs, info = env.reset(seed=3)
    names = [t["function"]["name"] for t in info["tools"]]
    assert names == ["echo", "finish"]
    assert all(t["type"] == "function" and "parameters" in t["function"] for t in info["tools"])
    assert '"name": "echo"' in obs and "<tool_call>" in obs


def test_same_seed_same_observations():
    def transcript(seed):
        env = gym.make("agentrl/Echo-v0")
        obs, _ = env.reset(seed=seed)
        out = [obs]
        for action in [call("echo", text="x"), "garbage", call("finish", answer="alpha")]:
            out.append(env.step(action)[:4])
        return out

    assert transcript(11) == transcript(11)
    secrets = {gym.make("agentrl/Echo-v0").reset(seed=s)[1]["secret"] for s in range(20)}
    assert len(secrets) > 1


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("no call at all", "No tool call found"),
        ('<tool_call>{"name": "echo", </tool_call>', "not valid JSON"),
        (call("fly", to="PEK"), "unknown tool 'fly'"),
        (call("echo"), "text: Field required"),
        (call("echo", text=5), "text: Input should be a valid string"),
    ],
)
def test_malformed_actions_become_observations(action, expected):
    env = gym.make("agentrl/Echo-v0")
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert expected in obs
    assert (reward, terminated, truncated) == (0.0, False, False)
    # the episode goes on: a valid call still works afterwards
    obs, *_ = env.step(call("echo", text="still here"))
    assert "still here" in obs


def test_non_text_and_oversized_actions_are_refused_politely():
    env = gym.make("agentrl/Echo-v0").unwrapped
    env.reset(seed=0)
    obs, *_ = env.step(12345)
    assert "expected text" in obs
    obs, *_ = env.step("x" * (env.action_space.max_length + 1))
    assert "exceeds the limit" in obs


def test_finish_terminates_with_reward_and_ignores_later_calls():
    env = gym.make("agentrl/Echo-v0")
    _, info = env.reset(seed=5)
    obs, reward, terminated, truncated, step_info = env.step(
        call("finish", answer=info["secret"]) + call("echo", text="late")
    )
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert "ignored" in obs
    with pytest.raises(EpisodeOverError):
        env.unwrapped.step(call("echo", text="after"))


def test_wrong_answer_scores_zero():
    env = gym.make("agentrl/Echo-v0")
    env.reset(seed=5)
    assert env.step(call("finish", answer="definitely-not-the-word"))[1] == 0.0


def test_max_turns_truncates():
    env = gym.make("agentrl/Echo-v0", max_turns=2)
    env.reset(seed=0)
    assert env.step(call("echo", text="a"))[3] is False
    _, reward, terminated, truncated, info = env.step(call("echo", text="b"))
    assert (reward, terminated, truncated, info["turn"]) == (0.0, False, True, 2)


def test_ansi_render_shows_the_transcript():
    env = gym.make("agentrl/Echo-v0", render_mode="ansi")
    env.reset(seed=0)
    env.step(call("echo", text="hello-render"))
    text = env.render()
    assert "[assistant]" in text and "hello-render" in text


def test_text_space_accepts_any_characters_within_length():
    space = TextSpace(10)
    assert space.contains("<{ü}>")
    assert not space.contains("x" * 11)
    assert not space.contains(b"bytes")
    assert space.contains(space.sample())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=200), min_size=1, max_size=6))
def test_random_text_never_crashes(actions):
    env = gym.make("agentrl/Echo-v0").unwrapped
    env.reset(seed=1)
    for action in actions:
        obs, reward, terminated, truncated, _ = env.step(action)
        assert env.observation_space.contains(obs)
        if terminated or truncated:
            break
