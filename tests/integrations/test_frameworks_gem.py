"""GEM (ROLL's env interface): `gem.make` and GEM's own vector env drive Flights-v0 served on loopback
with the oracle's actions on one seed and a refusal on another; a group made with the same keywords
and seed stays in lockstep; every server-side episode is deleted when it ends. ROLL itself is not on
the package index: its agentic pipeline makes and steps envs through exactly these calls."""

from __future__ import annotations

import gymnasium as gym
import pytest
from framework_helpers import GIVE_UP, scenario
from integrations_helpers import FLIGHTS, counters, require, served

gem = require("gem")

from agentrl.integrations.gem import AgentrlGemEnv, register  # noqa: E402


def play(env, seed: int, actions) -> list[tuple]:  # type: ignore[no-untyped-def]
    observation, _ = env.reset(seed=seed)
    trace = [(observation, 0.0, False)]
    for action in actions:
        observation, reward, terminated, truncated, _ = env.step(action)
        trace.append((observation, reward, terminated or truncated))
        if terminated or truncated:
            break
    return trace


def test_make_reset_step_pay_the_env_reward_and_end_every_episode():
    register()
    register()  # idempotent
    with served() as url:
        plan = scenario(url)
        env = gem.make(FLIGHTS, base_url=url, split="train", env_kwargs=plan.env_kwargs)
        assert isinstance(env, AgentrlGemEnv) and isinstance(env, gem.Env)
        traces = {s: plan.trace(url, s) for s in (plan.solved, plan.given_up)}
        before = counters(url)
        for seed, reward in ((plan.solved, 1.0), (plan.given_up, 0.0)):
            got = play(env, seed, plan.replies(seed))
            assert got == traces[seed]  # RemoteEnv's observations, rewards and ends
            assert sum(r for _, r, _ in got) == reward and got[-1][2]
            assert counters(url).live == before.live  # the episode ended: deleted on the server
        env.reset(seed=plan.solved)
        env.close()
        after = counters(url)
        assert after.created - before.created == 3 and after.closed - before.closed == 3 and after.live == 0


def test_a_group_shares_seed_and_config_and_stays_in_lockstep():
    register()
    with served() as url:
        plan = scenario(url)
        group = gem.make_vec([FLIGHTS] * 3, vec_kwargs=[{"base_url": url, "split": "train"}] * 3)
        observations, _ = group.reset(seed=[plan.solved] * 3)
        assert len(set(observations)) == 1 and observations[0] == plan.first_observations[plan.solved]
        for action in plan.actions[:-1]:
            observations, rewards, terminated, truncated, _ = group.step([action] * 3)
            assert len(set(observations)) == 1 and not any(terminated)
        # a spawned copy of one member is in the same state: the last action pays it as it pays the member
        last = plan.trace(url, plan.solved)[-1][0]
        member = group.envs[0]
        copy = member.spawn(same_state=True)
        assert copy.step(plan.actions[-1])[:3] == member.step(plan.actions[-1])[:3] == (
            last, 1.0, True)
        fresh = member.spawn()
        assert fresh.config == member.config and not fresh.started
        copy.close()
        fresh.close()
        for env in group.envs:  # GEM's vector env has no close of its own
            env.close()
        assert counters(url).live == 0


def test_in_process_env_and_bad_use():
    register()
    env = gem.make(FLIGHTS, split="train", env_kwargs={"max_turns": 1}, seed=5)
    observation, info = env.reset()  # the keyword seed
    local = gym.make(FLIGHTS)
    assert observation == local.reset(seed=5, options={"split": "train"})[0]
    assert env.step(GIVE_UP)[3] is True  # truncated at max_turns
    with pytest.raises(ValueError, match="reset it first"):
        AgentrlGemEnv(FLIGHTS).spawn(same_state=True)
    with pytest.raises(ValueError, match="split"):
        gem.make(FLIGHTS, split="validation").reset(seed=0)
    env.close()
