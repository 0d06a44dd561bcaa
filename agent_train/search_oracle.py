"""Oracle episodes for Search-v0, for SFT, written through the env's public API only.

The oracle sees the env's privileged info (`privileged_info=True`, an operator kwarg): the gold
answers and the titles of the evidence passages in hop order. It searches for each evidence
title in turn and answers with the gold string. Every name it searches for after the first is
written in the passage the previous search returned, so a model can learn to do the same
without privileged info. Only episodes the env itself rewards 1.0 are written, as plain chat
turns in exactly the text the env and the model exchange, so `agent-train sft` tokenizes them
as rollouts are tokenized.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ENV = "agentrl/Search-v0"


class SearchOracle:
    """The oracle as an episode driver policy: a search for each evidence title, then the gold answer."""

    def __init__(self) -> None:
        self.plan: list[str] | None = None

    def __call__(self, observation: str, info: dict[str, Any]) -> str | None:
        if self.plan is None:  # the reset: the answer key
            if "privileged" not in info:
                raise ValueError(f"{ENV} gave no privileged info: build it with privileged_info=True")
            secret = info["privileged"]
            self.plan = [f"<search> {title} </search>" for title in secret["evidence"]]
            self.plan.append(f"<answer> {secret['answers'][0]} </answer>")
        return self.plan.pop(0) if self.plan else None


def oracle_episode(env: Any, seed: int) -> dict[str, Any] | None:
    """One episode as chat turns, or None when the oracle's path is not rewarded. The turns are a
    view of the episode's trajectory record: every turn but the env's reply to the answer."""
    from agentrl.core.trajectory import transcript
    from agentrl.driver import Episode, play

    episode = Episode(env)
    policy = SearchOracle()
    play(episode, policy, seed)
    record = episode.record()
    if policy.plan or not record["steps"]:  # the env ended the episode before the answer
        return None
    reward = float(record["steps"][-1]["reward"])
    return {"messages": transcript(record)[:-1], "reward": reward} if reward >= 1.0 else None


def export_search_sft(
    path: str | Path, seeds: range | list[int], env_kwargs: dict[str, Any] | None = None, split: str = "train"
) -> dict[str, int]:
    """Write the oracle's rewarded episodes on `seeds` of `split`; returns counts."""
    import gymnasium as gym

    import agentrl  # noqa: F401  (registers the ids)

    env = gym.make(ENV, **{**(env_kwargs or {}), "split": split, "privileged_info": True})
    written = tried = 0
    with Path(path).open("w", encoding="utf-8") as out:
        for seed in seeds:
            tried += 1
            episode = oracle_episode(env, seed)
            if episode is not None:
                out.write(json.dumps({**episode, "seed": seed, "split": split}, ensure_ascii=False) + "\n")
                written += 1
    env.close()
    return {"tried": tried, "written": written}
