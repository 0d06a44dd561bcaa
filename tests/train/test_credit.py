"""Step-level credit (`agent_train/credit.py`): anchor and branch advantages on hand-built trees with
known answers, per-token expansion, the `--credit` flag, and branch rollouts over HTTP whose forks are
all closed once their group is done."""

from __future__ import annotations

import asyncio
import json
import math
import re
from types import SimpleNamespace

import pytest

from agentrl.agent_train.backends import Generation
from agentrl.agent_train.cli import config_from_args
from agentrl.agent_train.config import TrainConfig
from agentrl.agent_train.credit import (
    advantage_tensor,
    anchor_advantages,
    assign_credit,
    branch_advantages,
    collect_branch_groups,
    discounted_returns,
)
from agentrl.agent_train.rollout import RolloutEpisode, RolloutLimits, Rollouts, driver_factory
from agentrl.agent_train.transcript import Transcript

R2 = math.sqrt(2)


def leaf(states: list[str | None], rewards: list[float], fork_turn: int | None = None) -> RolloutEpisode:
    """An episode of len(rewards) turns, each turn's generation 2 tokens after 3 prompt tokens."""
    n = len(rewards)
    transcript = Transcript(tokenizer=None, ids=list(range(3 + 4 * n)), mask=([0] * 3 + [1, 1, 0, 0] * n))
    return RolloutEpisode(
        seed=0,
        transcript=transcript,
        reward=sum(rewards),
        turns=n,
        turn_starts=[3 + 4 * t for t in range(n)],
        state_hashes=states,
        step_rewards=rewards,
        fork_turn=fork_turn,
    )


def test_discounted_returns():
    assert discounted_returns([0, 0, 1], 0.5) == [0.25, 0.5, 1.0]
    assert discounted_returns([1, 0, 2], 1.0) == [3, 2, 2]


def test_anchor_advantages_on_a_hand_built_group():
    # e0 and e1 both reach state A after their first turn; e0 then wins, e1 loses; e2 never reaches A
    e0 = leaf(["s0", "A", "B"], [0, 1])
    e1 = leaf(["s0", "A", "C"], [0, 0])
    e2 = leaf(["s0", "D"], [0])
    ep = [2 / 3 / math.sqrt(2 / 9), -1 / 3 / math.sqrt(2 / 9), -1 / 3 / math.sqrt(2 / 9)]  # 1.414, -.707 x2
    per_turn, metrics = anchor_advantages(
        [[e0, e1, e2]], [[1.0, 0.0, 0.0]], [[True] * 3], [ep], gamma=0.5, omega=0.5
    )
    # state s0: returns (0.5, 0, 0) normalise like the episode level; state A: (1, 0) -> (+1, -1)
    expect = [[ep[0] + 0.5 * ep[0], ep[0] + 0.5], [ep[1] + 0.5 * ep[1], ep[1] - 0.5], [ep[2] + 0.5 * ep[2]]]
    assert per_turn[0] == [pytest.approx(x) for x in expect]
    assert metrics["anchor_groups"] == 2 and metrics["zero_var_groups_anchor"] == 0.0
    # an invalid episode is in no step group; its state A partner is then alone (A_S = 0)
    per_turn, metrics = anchor_advantages(
        [[e0, e1, e2]], [[1.0, 0.0, 0.0]], [[True, False, True]], [[1.0, 0.0, -1.0]], gamma=1.0, omega=1.0
    )
    assert per_turn[0][0][1] == pytest.approx(1.0) and metrics["anchor_groups"] == 1


def test_anchor_groups_a_revisited_state_and_pays_a_shuffled_reward_at_the_end():
    # e0 loops back to s0 (the GiGPO case), so s0 holds three steps; both fail: zero variance
    e0 = leaf(["s0", "s0", "X"], [0, 0])
    e1 = leaf(["s0", "Y"], [0])
    per_turn, metrics = anchor_advantages([[e0, e1]], [[0.0, 0.0]], [[True, True]], [[0.0, 0.0]], 0.9, 1.0)
    assert per_turn == [[[0.0, 0.0], [0.0]]] and metrics["zero_var_groups_anchor"] == 1.0
    assert metrics["anchor_group_size"] == 3
    # the shuffled control gives e0 the reward: its return arrives at its last step
    per_turn, _ = anchor_advantages([[e0, e1]], [[1.0, 0.0]], [[True, True]], [[1.0, -1.0]], 0.5, 1.0)
    # s0 returns: e0 t0 0.5, e0 t1 1.0, e1 t0 0.0 -> normalised (0, 1.2247, -1.2247)
    assert per_turn[0][0] == pytest.approx([1.0, 1.0 + 1.2247449])
    assert per_turn[0][1] == pytest.approx([-1.0 - 1.2247449])


def test_missing_state_hashes_fall_back_to_the_observations():
    a, b = leaf([None, None], [1]), leaf([None, None], [0])
    for e in (a, b):
        e.transcript.messages = [{"role": "user", "content": "q?"}, {"role": "assistant", "content": "x"}]
    per_turn, metrics = anchor_advantages([[a, b]], [[1.0, 0.0]], [[True, True]], [[1.0, -1.0]], 1.0, 1.0)
    assert per_turn == [[[2.0], [-2.0]]] and metrics["anchor_groups"] == 1


def test_branch_advantages_on_a_hand_built_tree():
    root = leaf(["s0", "a", "b", "c"], [0, 0, 1])
    f1, f2 = leaf(["s0", "a", "x"], [0, 0], fork_turn=1), leaf(["s0", "a", "y"], [0, 0], fork_turn=1)
    root.branches = [(1, [f1, f2])]
    other = leaf(["s0", "z", "w"], [0, 0])
    rewards = {id(e): e.reward for e in (root, f1, f2, other)}
    samples, per_turn, metrics = branch_advantages([[root, other]], rewards, 1.0, lambda e: True)
    assert samples == [[root, f1, f2, other]]
    le = [3 / math.sqrt(3), -1 / math.sqrt(3)]  # leaves (1, 0, 0, 0): 1.732, -0.577
    assert per_turn[0][0] == pytest.approx([le[0], le[0] + R2, le[0] + R2])
    assert per_turn[0][1] == pytest.approx([le[1], le[1] - R2 / 2])  # its turn 0 is the root's (masked)
    assert per_turn[0][3] == pytest.approx([le[1], le[1]])
    assert metrics["branch_groups"] == 1 and metrics["zero_var_groups_branch"] == 0.0
    assert metrics["branch_episodes"] == 2
    # two fork points: a root's later turns take the later siblings' advantage
    g1, g2 = leaf(["s0", "a", "b", "q"], [0, 0, 1], fork_turn=2), leaf(["s0", "a", "b", "r"], [0, 0, 1], 2)
    root.branches.append((2, [g1, g2]))
    rewards.update({id(g1): 1.0, id(g2): 1.0})
    _, per_turn, metrics = branch_advantages([[root, other]], rewards, 1.0, lambda e: True)
    assert metrics["zero_var_groups_branch"] == 0.5  # (1, 1, 1) at turn 2 does not vary
    assert per_turn[0][0][2] == pytest.approx(per_turn[0][0][0])  # turn 2: only the leaf level


def test_advantages_expand_per_turn_over_each_turns_tokens():
    e = leaf(["s0", "a", "b"], [0, 1])
    adv = advantage_tensor([e, e], [[1.0, -2.0], 0.5], width=12)
    assert adv.shape == (2, 12)
    assert adv[0, 3:7].tolist() == [1.0] * 4 and adv[0, 7:11].tolist() == [-2.0] * 4
    assert adv[1].tolist() == [0.5] * 12
    assert advantage_tensor([e], [0.25], 12).tolist() == [0.25]  # GRPO: one per sequence, as before
    with pytest.raises(ValueError, match="turn advantages"):
        advantage_tensor([e], [[1.0, 2.0, 3.0]], 12)


def test_episode_mode_is_grpo_and_skips_flat_groups():
    cfg = TrainConfig(credit="episode")
    groups = [[leaf(["s"], [1]), leaf(["s"], [0])], [leaf(["s"], [0]), leaf(["s"], [0])]]
    credit = assign_credit(cfg, groups, 0)
    assert credit.advantages[0].tolist() == [1.0, -1.0] and credit.keep[1].tolist() == [False, False]
    anchor = assign_credit(TrainConfig(credit="anchor"), groups, 0)
    assert anchor.keep == [[True, True], [False, False]] and anchor.metrics["trainable_frac"] == 0.5


def test_credit_flag_parses_and_rejects_unknown_modes(capsys):
    assert config_from_args(["--credit", "anchor", "--credit-omega", "0.5"]).credit_omega == 0.5
    assert config_from_args(["--credit", "branch"]).credit == "branch"
    assert config_from_args([]).credit == "episode"
    with pytest.raises(SystemExit):
        config_from_args(["--credit", "vine"])
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(ValueError, match="credit"):
        TrainConfig(credit="vine")


class EchoPolicy:
    """Echoes until two results are shown, then finishes with the secret on even sampling seeds and
    a wrong word on odd ones: siblings differ, so branches get advantages."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer, self.version, self.generated_tokens, self.busy_s = tokenizer, 0, 0, 0.0
        self.suppress_ids: list[int] = []

    async def generate(self, prompt_ids, max_new_tokens, seed=None) -> Generation:
        prompt = self.tokenizer.decode(prompt_ids)
        secret = re.search(r"word '(\w+)'", prompt).group(1)
        if prompt.count("<tool_response>") < 3:  # the tool list names the tag once
            text = '<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>'
        else:
            word = secret if (seed or 0) % 2 == 0 else "nope"
            text = json.dumps({"name": "finish", "arguments": {"answer": word}}).join(
                ["<tool_call>", "</tool_call>"]
            )
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id][
            :max_new_tokens
        ]
        self.generated_tokens += len(ids)
        return Generation(ids, [-0.5] * len(ids), self.version, True)


def test_branch_rollouts_over_http_close_every_fork(smollm2_tokenizer):
    from agentrl.client import EnvClient
    from agentrl.server.config import ServerConfig
    from agentrl.server.local import serve_in_thread

    limits = RolloutLimits(max_new_tokens=64, token_budget=4096)
    with serve_in_thread(ServerConfig(env_ids=("agentrl/Echo-v0",))) as url, EnvClient(url) as client:
        backend = EchoPolicy(smollm2_tokenizer)
        spec = Rollouts(driver_factory("agentrl/Echo-v0", env_url=url), backend, smollm2_tokenizer, limits, 4)
        groups = asyncio.run(collect_branch_groups(spec, [3, 4], 2, sample_seed=11, branches=2, points=2))
        assert client.health()["live_episodes"] == 0  # every root and every fork is closed
    roots = [e for g in groups for e in g]
    assert all(e.error is None and e.excluded is None for e in roots), [e.error for e in roots]
    for root in roots:
        assert [t for t, _ in root.branches] == [1, 2] and all(len(f) == 2 for _, f in root.branches)
        for turn, forks in root.branches:
            for f in forks:
                assert f.error is None and f.fork_turn == turn and f.turns == 3
                assert f.state_hashes[: turn + 1] == root.state_hashes[: turn + 1]
                assert (
                    f.transcript.ids[: f.turn_starts[turn]] == root.transcript.ids[: root.turn_starts[turn]]
                )
                assert sum(f.transcript.mask[: f.turn_starts[turn]]) == 0  # the prefix is the root's to train
                assert f.transcript.generated_tokens > 0
    # the token count covers every branch: roots and forks
    total = sum(
        e.transcript.generated_tokens
        for root in roots
        for e in (root, *(b for _, fs in root.branches for b in fs))
    )
    assert backend.generated_tokens == total
    cfg = SimpleNamespace(
        credit="branch", shuffle_rewards=False, seed=0, credit_omega=1.0, zero_variance="skip"
    )
    credit = assign_credit(cfg, groups, 0)
    assert [len(s) for s in credit.samples] == [2 + 2 * 4, 2 + 2 * 4]
    assert credit.metrics["branch_groups"] == 8 and credit.metrics["branch_episodes"] == 16
    assert 0 < credit.metrics["trainable_frac"] <= 1
