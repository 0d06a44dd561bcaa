"""Which steps earned an episode's reward: the advantage each generated token is trained with.

`--credit` picks one of three ways, all from the same rollouts' rewards:

* `episode` (GRPO): every token of an episode gets its episode's group-normalised reward.
* `anchor` (GiGPO, Feng et al. 2025, "Group-in-Group Policy Optimization for LLM Agent
  Training"): the steps of a task's rollouts that start from the same environment state (the env's
  `info["state_hash"]`, an *anchor state*) form a step group. A step's discounted return
  R_t = sum_k gamma^k r_{t+k} is normalised within its step group, and the two levels are added:

      A(a_t) = A_E(tau) + omega * A_S(a_t),
      A_E(tau) = (R(tau) - mean_group R) / std_group R,
      A_S(a_t) = (R_t - mean_{step group} R) / std_{step group} R

  (the paper's eq. 7 with F_norm = std; a step alone in its group has A_S = 0). No extra rollouts.
* `branch` (Tree-GRPO / VinePPO): at the states before chosen turns of each rollout (every tool-call
  boundary, up to `credit_branch_points` of them) the episode is forked `credit_branches` ways (the
  env's `fork`; over HTTP the server's fork route) and each fork is continued by the current policy.
  The forks and the rollout's own continuation are siblings: the same state, different actions. A
  token's advantage is its leaf's episode advantage among all the task's leaves plus its segment's
  advantage among its siblings, A = A_E + omega * A_B. A fork's copy of the shared prefix is masked
  out (trained once, in its root), and every fork is closed as soon as it ends. The generated-token
  budget counts every branch.

Each level reports the share of its groups with zero variance (`zero_var_groups` for episodes,
`zero_var_groups_anchor` / `zero_var_groups_branch`), which train nothing at that level.
"""

from __future__ import annotations

import asyncio
import copy
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import numpy as np
import torch

from agentrl.agent_train.backends import derive_seed
from agentrl.agent_train.grpo import group_advantages
from agentrl.agent_train.rollout import RolloutEpisode, Rollouts, collect_groups, continue_fork, run_episode
from agentrl.driver import AsyncEpisode

CreditMode = Literal["episode", "anchor", "branch"]
MODES = ("episode", "anchor", "branch")
EPS = 1e-6
BRANCH_STREAM = 7919  # sampling-seed stream of the forks, apart from the roots' turn seeds

Advantage = float | list[float]  # one per episode, or one per turn


@dataclass
class Credit:
    """What a step trains on: per task, its samples (branch: the roots, then their forks), each
    sample's advantage (a number, or one per turn), whether it is kept, and the levels' metrics."""

    samples: list[list[RolloutEpisode]]
    # GRPO's (groups, G) tensors as `group_advantages` gives them, or per sample a list of per-turn values
    advantages: torch.Tensor | Sequence[Sequence[Advantage]]
    keep: torch.Tensor | Sequence[Sequence[bool]]
    metrics: dict[str, float]


# ---------------------------------------------------------------------------------------------
# advantages
# ---------------------------------------------------------------------------------------------
def normalised(values: list[float]) -> tuple[list[float], bool]:
    """(value - mean) / std over `values`; all zeros, and True, when they do not vary."""
    arr = np.asarray(values, dtype=np.float64)
    std = arr.std() if len(arr) else 0.0
    if len(arr) < 2 or std <= EPS:
        return [0.0] * len(arr), True
    return list((arr - arr.mean()) / std), False


def discounted_returns(rewards: list[float], gamma: float) -> list[float]:
    out, running = [0.0] * len(rewards), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


def _fallback_state(episode: RolloutEpisode, turn: int) -> str:
    """For envs without `state_hash`: the observations so far stand for the state."""
    from agentrl.core.state_hash import state_hash

    observations = [m["content"] for m in episode.transcript.messages if m["role"] == "user"]
    return "obs:" + state_hash(observations[: turn + 1])


def anchor_advantages(
    groups: list[list[RolloutEpisode]],
    episode_rewards: list[list[float]],
    valid: list[list[bool]],
    episode_adv: list[list[float]],
    gamma: float,
    omega: float,
) -> tuple[list[list[list[float]]], dict[str, float]]:
    """GiGPO's A_E + omega * A_S per turn (see the module docstring); `episode_rewards` may be
    shuffled (the negative control): each episode's return is then paid at its last step."""
    out: list[list[list[float]]] = []
    sizes, flat = [], []
    for group, rewards, ok, adv in zip(groups, episode_rewards, valid, episode_adv, strict=True):
        anchors: dict[str, list[tuple[int, int, float]]] = defaultdict(list)
        for i, (e, reward) in enumerate(zip(group, rewards, strict=True)):
            if not ok[i]:
                continue
            steps = list(e.step_rewards)
            if sum(steps) != reward:  # shuffled rewards: the episode's return, paid at its end
                steps = [0.0] * max(len(steps) - 1, 0) + [reward]
            for t, ret in enumerate(discounted_returns(steps, gamma)):
                known = e.state_hashes[t] if t < len(e.state_hashes) else None
                anchors[known or _fallback_state(e, t)].append((i, t, ret))
        step_adv: dict[tuple[int, int], float] = {}
        for members in anchors.values():
            if len(members) < 2:
                continue
            values, zero = normalised([r for *_, r in members])
            sizes.append(len(members))
            flat.append(zero)
            for (i, t, _), a in zip(members, values, strict=True):
                step_adv[(i, t)] = a
        out.append(
            [
                [adv[i] + omega * step_adv.get((i, t), 0.0) for t in range(e.turns)]
                for i, e in enumerate(group)
            ]
        )
    metrics = {
        "zero_var_groups_anchor": float(np.mean(flat)) if flat else 1.0,
        "anchor_groups": float(len(sizes)),
        "anchor_group_size": float(np.mean(sizes)) if sizes else 0.0,
    }
    return out, metrics


def branch_advantages(
    roots: list[list[RolloutEpisode]],
    rewards: dict[int, float],
    omega: float,
    ok: Callable[[RolloutEpisode], bool],
) -> tuple[list[list[RolloutEpisode]], list[list[list[float]]], dict[str, float]]:
    """Per task: its leaves (roots, then every fork) and each leaf's per-turn A_E + omega * A_B
    (see the module docstring). `rewards` maps id(leaf) to the reward used (shuffled or not)."""
    samples, advantages, flat_leaves, flat_siblings = [], [], [], []
    for group in roots:
        leaves = [e for root in group for e in (root, *(b for _, forks in root.branches for b in forks))]
        live = [e for e in leaves if ok(e)]
        values, zero = normalised([rewards[id(e)] for e in live])
        flat_leaves.append(zero)
        leaf_adv = {id(e): a for e, a in zip(live, values, strict=True)}
        per_turn = {id(e): [leaf_adv.get(id(e), 0.0)] * e.turns for e in leaves}
        for root in group:
            for turn, forks in root.branches:
                siblings = [e for e in (root, *forks) if ok(e)]
                sib_adv, sib_zero = normalised([rewards[id(e)] for e in siblings])
                flat_siblings.append(sib_zero)
                for e, a in zip(siblings, sib_adv, strict=True):
                    turns = per_turn[id(e)]
                    for t in range(turn, len(turns)):  # a later fork point of the root overrides
                        turns[t] = leaf_adv.get(id(e), 0.0) + omega * a
        samples.append(leaves)
        advantages.append([per_turn[id(e)] for e in leaves])
    forks = sum(len(s) for s in samples) - sum(len(g) for g in roots)
    metrics = {
        "zero_var_groups_leaves": float(np.mean(flat_leaves)) if flat_leaves else 1.0,
        "zero_var_groups_branch": float(np.mean(flat_siblings)) if flat_siblings else 1.0,
        "branch_groups": float(len(flat_siblings)),
        "branch_episodes": float(forks),
        "branch_excluded": float(sum(not ok(e) for s in samples for e in s if e.fork_turn is not None)),
        "branch_tokens": float(
            sum(e.transcript.generated_tokens for s in samples for e in s if e.fork_turn is not None)
        ),
    }
    return samples, advantages, metrics


def assign_credit(cfg: Any, groups: list[list[RolloutEpisode]], step: int) -> Credit:
    """Advantages of one training step's groups under `cfg.credit` (see the module docstring).

    `cfg.shuffle_rewards` (the negative control) permutes the rewards of every episode of the step,
    forks included, before any level sees them."""
    mode = cfg.credit
    if mode not in MODES:
        raise ValueError(f"credit must be one of {MODES}, not {mode!r}")
    if mode == "branch":
        return _branch_credit(cfg, groups, step)
    rewards = torch.tensor([[e.reward for e in g] for g in groups], dtype=torch.float32)
    if cfg.shuffle_rewards:  # a placebo run: no link left between what was said and its reward
        order = torch.randperm(rewards.numel(), generator=torch.Generator().manual_seed(step + cfg.seed))
        rewards = rewards.flatten()[order].view_as(rewards)
    valid = torch.tensor([[e.excluded is None for e in g] for g in groups])
    adv, keep = group_advantages(rewards, cfg.advantage, zero_variance=cfg.zero_variance, valid=valid)
    if mode == "episode":
        return Credit(groups, adv, keep, {})
    per_turn, metrics = anchor_advantages(
        groups, rewards.tolist(), valid.tolist(), adv.tolist(), cfg.credit_gamma, cfg.credit_omega
    )
    return _finish(groups, per_turn, valid.tolist(), cfg.zero_variance, metrics)


def _branch_credit(cfg: Any, groups: list[list[RolloutEpisode]], step: int) -> Credit:
    leaves = [e for g in groups for root in g for e in (root, *(b for _, fs in root.branches for b in fs))]
    values = torch.tensor([e.reward for e in leaves], dtype=torch.float32)
    if cfg.shuffle_rewards:
        values = values[torch.randperm(len(values), generator=torch.Generator().manual_seed(step + cfg.seed))]
    rewards = {id(e): float(v) for e, v in zip(leaves, values, strict=True)}
    samples, per_turn, metrics = branch_advantages(
        groups, rewards, cfg.credit_omega, lambda e: e.excluded is None
    )
    valid = [[e.excluded is None for e in s] for s in samples]
    return _finish(samples, per_turn, valid, cfg.zero_variance, metrics)


def _finish(
    samples: list[list[RolloutEpisode]],
    per_turn: list[list[list[float]]],
    valid: list[list[bool]],
    zero_variance: str,
    metrics: dict[str, float],
) -> Credit:
    """Keep what may be trained on: valid, and (under "skip") with some token's advantage nonzero."""

    def trains(adv: list[float]) -> bool:
        return any(abs(a) > EPS for a in adv)

    keep = [
        [ok and (zero_variance == "keep" or trains(adv)) for ok, adv in zip(v, turns, strict=True)]
        for v, turns in zip(valid, per_turn, strict=True)
    ]
    n = sum(len(s) for s in samples)
    metrics["trainable_frac"] = sum(trains(adv) for g in per_turn for adv in g) / max(n, 1)
    return Credit(samples, per_turn, keep, metrics)


def advantage_tensor(episodes: list[RolloutEpisode], advantages: list[Advantage], width: int) -> torch.Tensor:
    """(n,) when every advantage is one number (GRPO, unchanged); else (n, width), each turn's
    advantage on the tokens from its start (`RolloutEpisode.turn_starts`) to the next turn's."""
    if all(not isinstance(a, list) for a in advantages):
        return torch.tensor(advantages, dtype=torch.float32)
    out = torch.zeros((len(episodes), width))
    for row, (e, adv) in enumerate(zip(episodes, advantages, strict=True)):
        if not isinstance(adv, list):
            out[row] = float(adv)
            continue
        starts = e.turn_starts[: len(adv)]
        if len(starts) != len(adv):
            raise ValueError(f"{len(adv)} turn advantages for an episode with {len(starts)} turns recorded")
        for t, (start, a) in enumerate(zip(starts, adv, strict=True)):
            end = starts[t + 1] if t + 1 < len(starts) else len(e.transcript.ids)
            out[row, start:end] = a
    return out


# ---------------------------------------------------------------------------------------------
# branch rollouts
# ---------------------------------------------------------------------------------------------
def fork_episode_state(episode: RolloutEpisode, turn: int) -> RolloutEpisode:
    """A fork's own copy of `episode` as it stands before `turn`: the transcript so far with its
    mask cleared (the prefix is trained in the root), no reward yet."""
    t = episode.transcript
    transcript = copy.copy(t)
    transcript.messages = [dict(m) for m in t.messages]
    transcript.ids, transcript.logprobs, transcript.versions = list(t.ids), list(t.logprobs), list(t.versions)
    transcript.mask = [0] * len(t.mask)
    return RolloutEpisode(
        seed=episode.seed,
        transcript=transcript,
        turns=episode.turns,
        task_id=episode.task_id,
        turn_starts=list(episode.turn_starts),
        state_hashes=list(episode.state_hashes),
        step_rewards=list(episode.step_rewards),
        reward=sum(episode.step_rewards),
        fork_turn=turn,
    )


async def collect_branch_groups(
    spec: Rollouts,
    seeds: list[int],
    group_size: int,
    sample_seed: int | None = None,
    on_done: Callable[[RolloutEpisode], Any] | None = None,
    *,
    branches: int = 2,
    points: int = 2,
) -> list[list[RolloutEpisode]]:
    """`collect_groups`, whose roots fork `branches` ways before each of their turns 1..`points`
    (the states after a tool call; turn 0's state is the reset, which the group already samples;
    `AsyncEpisode.fork`: over HTTP the server's fork route, in-process the env's own `fork`);
    `points` 0 forks at every turn. Forks run alongside; every fork is closed when it ends, and this
    returns only once every fork of every group has ended."""
    gate = asyncio.Semaphore(spec.concurrency)
    pending: list[asyncio.Task[RolloutEpisode]] = []

    def hook(own: int | None) -> Any:
        async def before_turn(env: AsyncEpisode, root: RolloutEpisode) -> None:
            turn = len(root.turn_starts)  # the turns taken so far
            if turn == 0 or (points and turn > points):
                return
            made = []
            for j, child in enumerate(await env.fork(branches)):
                fork = fork_episode_state(root, turn)
                seed = None if own is None else derive_seed(own, BRANCH_STREAM, turn, j)
                pending.append(asyncio.create_task(_gated(child, fork, seed)))
                made.append(fork)
            root.branches.append((turn, made))

        return before_turn

    async def _gated(env: AsyncEpisode, fork: RolloutEpisode, seed: int | None) -> RolloutEpisode:
        async with gate:
            return await continue_fork(spec, env, fork, seed)

    async def one(seed: int, j: int) -> RolloutEpisode:
        own = None if sample_seed is None else derive_seed(sample_seed, seed, j)
        async with gate:
            episode = await run_episode(spec, seed, own, before_turn=hook(own))
        if on_done is not None:
            on_done(episode)
        return episode

    try:
        flat = await asyncio.gather(*(one(s, j) for s in seeds for j in range(group_size)))
        while pending:  # forks made while others ran
            done, pending[:] = list(pending), []
            await asyncio.gather(*done)
    except BaseException:
        for task in pending:
            task.cancel()  # a cancelled fork still closes its episode (`_continue_fork`'s finally)
        await asyncio.gather(*pending, return_exceptions=True)
        raise
    return [list(flat[i * group_size : (i + 1) * group_size]) for i in range(len(seeds))]


def groups_collector(cfg: Any) -> Callable[..., Any]:
    """How a training step's groups are collected under `cfg.credit`."""
    if cfg.credit == "branch":
        return partial(collect_branch_groups, branches=cfg.credit_branches, points=cfg.credit_branch_points)
    return collect_groups
