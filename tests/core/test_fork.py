"""`env.fork(n)`: forks continue exactly as the parent would, by copy and by replay, and are isolated."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import pytest

import agentrl  # noqa: F401  (registers the ids)
from agentrl.core import EpisodeOverError, StepResult, TextEnv
from agentrl.core import tool_call as call
from agentrl.echo import EchoEnv


class DiceEnv(TextEnv):
    """Draws from its generator at reset and at every step, so a fork must carry the stream on."""

    default_max_turns = 6
    fork_by_copy = True

    def __init__(self, *, sides: int = 6, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sides = sides

    def _begin(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if options.get("fail"):
            raise ValueError("no such game")
        self.rolls = [int(self.np_random.integers(self.sides))]
        return f"first roll {self.rolls[0]}; say 'roll' or 'stop'", {}

    def _act(self, action: str) -> StepResult:
        if action == "stop":
            return StepResult(f"total {sum(self.rolls)}", float(sum(self.rolls)), True, False)
        self.rolls.append(int(self.np_random.integers(self.sides)))
        return StepResult(f"rolled {self.rolls[-1]}", 0.0, False, False, {"rolls": list(self.rolls)})


class ReplayDiceEnv(DiceEnv):
    fork_by_copy = False


class ReplayEchoEnv(EchoEnv):
    fork_by_copy = False


def play(env: TextEnv, actions: list[str]) -> list[tuple]:
    return [env.step(a) for a in actions]


@pytest.mark.parametrize("cls", [DiceEnv, ReplayDiceEnv])
@pytest.mark.parametrize("seed", [3, None])
def test_a_fork_continues_the_random_stream_exactly(cls, seed):
    env = cls(sides=1000, max_turns=5)
    env.reset(seed=seed)
    play(env, ["roll", "roll"])
    fork, twin = env.fork(2)
    assert type(fork) is cls and fork.sides == 1000 and fork.max_turns == 5
    assert fork.messages == env.messages and fork.turn == env.turn == 2
    rest = ["roll", "roll", "roll"]  # the third runs into max_turns: truncated in all three
    ours = play(env, rest)
    assert play(fork, rest) == ours and play(twin, rest) == ours
    assert ours[-1][3] is True  # truncated
    assert fork.messages == env.messages and fork.fork_divergence == []


@pytest.mark.parametrize("cls", [EchoEnv, ReplayEchoEnv])
def test_forks_are_isolated_from_each_other_and_from_the_parent(cls):
    env = cls(max_turns=6)
    env.reset(seed=5)
    env.step(call("echo", text="one"))
    before = (env.turn, [dict(m) for m in env.messages], len(env.trajectory()["steps"]))
    right, wrong = env.fork(2)
    _, r_right, done_right, _, _ = right.step(call("finish", answer=env._secret))
    _, r_wrong, done_wrong, _, _ = wrong.step(call("finish", answer="not it"))
    assert (r_right, r_wrong, done_right, done_wrong) == (1.0, 0.0, True, True)
    assert (env.turn, env.messages, len(env.trajectory()["steps"])) == before
    assert not env.episode_over
    # and the parent still plays on by itself
    _, reward, terminated, _, _ = env.step(call("finish", answer=env._secret))
    assert (reward, terminated) == (1.0, True)


def test_replayed_fork_keeps_constructor_arguments_and_a_seedless_reset():
    env = ReplayEchoEnv(max_turns=3)
    env.reset()  # no seed: the replay restores the generator's state as it was
    env.step(call("echo", text="a"))
    (fork,) = env.fork()
    assert fork is not env and fork.max_turns == 3 and fork._secret == env._secret
    assert fork.messages == env.messages and fork.fork_divergence == []
    # max_turns came along: the next step after this one truncates both alike
    assert play(fork, [call("echo", text="b"), call("echo", text="c")]) == play(
        env, [call("echo", text="b"), call("echo", text="c")]
    )
    assert env.episode_over and fork.episode_over


def test_gym_made_env_forks_keep_their_id():
    env = gym.make("agentrl/Echo-v0").unwrapped
    env.reset(seed=1)
    (fork,) = env.fork()
    assert fork.spec is not None and fork.spec.id == "agentrl/Echo-v0"
    assert fork.trajectory()["env_id"] == "agentrl/Echo-v0"


@pytest.mark.parametrize("cls", [EchoEnv, ReplayEchoEnv])
def test_a_finished_or_unstarted_episode_cannot_be_forked(cls):
    env = cls()
    with pytest.raises(EpisodeOverError):
        env.fork()
    env.reset(seed=0)
    env.step(call("finish", answer="x"))
    with pytest.raises(EpisodeOverError):
        env.fork()


@pytest.mark.parametrize("n", [0, -1, True, 1.5, "2"])
def test_fork_count_must_be_a_positive_integer(n):
    env = EchoEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="positive integer"):
        env.fork(n)


def test_the_parent_remembers_its_forks_and_forgets_them_at_reset():
    env = EchoEnv()
    env.reset(seed=0)
    first = env.fork()
    env.step(call("echo", text="x"))
    second = env.fork(2)
    assert [(k, id(c)) for k, c in env._forks] == [(0, id(first[0])), (1, id(second[0])), (1, id(second[1]))]
    assert len({id(c) for c in (*first, *second)}) == 3
    assert first[0]._forks == []  # a fork starts with no children of its own
    env.reset(seed=1)
    assert env._forks == [] and env.trajectory()["forks"] == []


def test_a_fork_of_a_fork_continues_exactly():
    env = DiceEnv(sides=100)
    env.reset(seed=9)
    env.step("roll")
    (child,) = env.fork()
    child.step("roll")
    (grandchild,) = child.fork()
    assert play(grandchild, ["roll", "stop"]) == play(child, ["roll", "stop"])
    assert env.turn == 1 and not env.episode_over


def test_a_failed_reset_leaves_no_episode_to_step_or_fork():
    env = DiceEnv()
    env.reset(seed=1)
    env.step("roll")
    with pytest.raises(ValueError, match="no such game"):
        env.reset(options={"fail": True})
    with pytest.raises(EpisodeOverError):
        env.step("roll")
    with pytest.raises(EpisodeOverError):
        env.fork()


class TextSeenEnv(TextEnv):
    """Says how it saw each action: text or not, and whether the text was valid UTF-8."""

    fork_by_copy = False

    def _begin(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self.seen: list[str] = []
        return "go", {}

    def _act(self, action: str) -> StepResult:
        try:
            action.encode("utf-8")
            self.seen.append("text")
        except UnicodeEncodeError:
            self.seen.append("not utf-8")
        return StepResult(" ".join(self.seen), 0.0, False, False)


def test_a_replay_feeds_the_fork_each_action_as_the_env_received_it_not_as_recorded():
    env = TextSeenEnv()
    env.reset(seed=1)
    env.step(12345)  # not text: refused, and recorded as its repr
    env.step("a \ud800 b")  # a lone surrogate: recorded made safe
    env.step("plain")
    record = env.trajectory()
    first, second = record["steps"][0]["action"], record["steps"][1]["action"]
    assert first == "12345" and "\ud800" not in second
    (fork,) = env.fork()
    assert fork.fork_divergence == [] and fork.seen == env.seen == ["not utf-8", "text"]
    assert fork.trajectory() == record and "received" not in json.dumps(record)
