"""One record of an episode: what used to be kept by hand beside the trajectory record (the chat
messages, the demo's summary, SFT lines) is now computed from it, and equals what the hand-kept
copies held, step for step, on real Echo-v0, Flights-v0 and Search-v0 episodes.

The `kept_*` functions are the bookkeeping the views replaced, written as it was: each builds its
copy while the episode is played, from what `reset` and `step` return."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest

import agentrl  # noqa: F401  (registers the ids)
from agentrl.agent_train.search_oracle import oracle_episode
from agentrl.core import tool_call as call
from agentrl.core.trajectory import transcript
from agentrl.demo import play_episode
from agentrl.flights.oracle import OraclePolicy, RandomPolicy, record_chat, to_chat

SEARCH_WORLD = {"world_seed": 7, "world_passages": 600}


@pytest.fixture(autouse=True)
def _index_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Search-v0 caches the indexes it builds; keep this module's out of the user's cache."""
    monkeypatch.setenv("AGENTRL_CACHE", str(tmp_path_factory.getbasetemp() / "agentrl-cache"))


def kept_by_hand(env: Any, policy: Any, seed: int, options: dict[str, Any] | None = None
                 ) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """Play an episode keeping the messages (as `TextEnv` kept them) and the demo's dict (as
    `play_episode` built it) by hand, step by step; less the dict's per-step `progress`, which the
    summary no longer carries (nothing read it; the final progress stays)."""
    observation, info = env.reset(seed=seed, options=options)
    messages = [{"role": "user", "content": observation}]
    kept: dict[str, Any] = {"seed": seed, "options": options or {}, "task": info.get("task"),
                            "tools": info.get("tools", []), "task_text": observation, "steps": [],
                            "reward": 0.0}
    done = False
    while not done:
        action = policy(observation, info)
        observation, reward, terminated, truncated, info = env.step(action)
        messages += [{"role": "assistant", "content": action}, {"role": "user", "content": observation}]
        kept["steps"].append({"action": action, "observation": observation, "reward": reward})
        kept["reward"] += reward
        done = terminated or truncated
    kept["terminated"] = terminated
    kept["final_progress"] = info.get("progress")
    return messages, kept


class EchoPolicy:
    """Echo the secret word once, then finish with it."""

    def __init__(self) -> None:
        self.word: str | None = None

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        if self.word is None:
            self.word = observation.split("'")[1]
            return call("echo", text=self.word)
        return call("finish", answer=self.word)


class SearchPolicy:
    """Search twice, then answer with the gold answer (read from the env, as a test may)."""

    def __init__(self, env: Any) -> None:
        self.env, self.turn = env, 0

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        self.turn += 1
        if self.turn <= 2:
            return f"<think>{self.turn}</think><search>company founded {self.turn}</search>"
        return f"<answer>{self.env.question.answers[0]}</answer>"


CASES = {
    "echo": (lambda: gym.make("agentrl/Echo-v0").unwrapped, lambda env: EchoPolicy()),
    "flights-oracle": (lambda: gym.make("agentrl/Flights-v0", stochastic=True,
                                        privileged_info=True).unwrapped, lambda env: OraclePolicy()),
    "flights-random": (lambda: gym.make("agentrl/Flights-v0", privileged_info=True).unwrapped,
                       lambda env: RandomPolicy(3)),
    "search": (lambda: gym.make("agentrl/Search-v0", **SEARCH_WORLD).unwrapped, SearchPolicy),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("seed", [0, 5])
def test_messages_and_the_demo_summary_are_views_equal_to_the_hand_kept_copies(case, seed):
    make, make_policy = CASES[case]
    env = make()
    try:
        messages, kept = kept_by_hand(env, make_policy(env), seed)
        assert env.messages == messages
        assert transcript(env.trajectory()) == messages
        again = make()
        try:
            assert play_episode(again, make_policy(again), seed) == kept
            assert again.messages == messages
        finally:
            again.close()
    finally:
        env.close()


@pytest.mark.parametrize("seed", [1, 2, 9])
def test_sft_chat_lines_are_a_view_of_the_record(seed):
    env = gym.make("agentrl/Flights-v0", stochastic=True, privileged_info=True).unwrapped
    try:
        _, kept = kept_by_hand(env, OraclePolicy(), seed)
        assert kept["reward"] == 1.0
        assert record_chat(env.trajectory(), kept["task"]) == to_chat(kept, kept["tools"])
    finally:
        env.close()


def test_search_oracle_sft_turns_are_a_view_of_the_record():
    env = gym.make("agentrl/Search-v0", **SEARCH_WORLD, privileged_info=True)
    try:
        for seed in range(6):
            line = oracle_episode(env, seed)
            if line is None:
                continue
            # as the oracle kept them: the first observation, each search and its result, the answer
            observation, info = env.reset(seed=seed)
            secret, kept = info["privileged"], [{"role": "user", "content": observation}]
            for title in secret["evidence"]:
                action = f"<search> {title} </search>"
                kept += [{"role": "assistant", "content": action},
                         {"role": "user", "content": env.step(action)[0]}]
            answer = f"<answer> {secret['answers'][0]} </answer>"
            reward = env.step(answer)[1]
            kept.append({"role": "assistant", "content": answer})
            assert line == {"messages": kept, "reward": float(reward)}
            break
        else:
            pytest.fail("the oracle was rewarded on none of the seeds")
    finally:
        env.close()


def test_a_fork_shows_its_parents_messages_then_its_own():
    env = gym.make("agentrl/Echo-v0").unwrapped
    env.reset(seed=4)
    policy = EchoPolicy()
    env.step(policy(env.messages[0]["content"], {}))
    (fork,) = env.fork()
    assert fork.messages == env.messages and len(fork.messages) == 3
    fork.step(policy("", {}))
    assert fork.messages[:3] == env.messages and len(fork.messages) == 5 and len(env.messages) == 3
