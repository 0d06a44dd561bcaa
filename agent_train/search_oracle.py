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


def oracle_episode(env: Any, seed: int) -> dict[str, Any] | None:
    """One episode as chat turns, or None when the oracle's path is not rewarded."""
    obs, info = env.reset(seed=seed)
    if "privileged" not in info:
        raise ValueError(f"{ENV} gave no privileged info: build it with privileged_info=True")
    secret = info["privileged"]
    messages = [{"role": "user", "content": obs}]
    for title in secret["evidence"]:
        action = f"<search> {title} </search>"
        obs, _, terminated, truncated, _ = env.step(action)
        messages += [{"role": "assistant", "content": action}, {"role": "user", "content": obs}]
        if terminated or truncated:
            return None
    action = f"<answer> {secret['answers'][0]} </answer>"
    _, reward, *_ = env.step(action)
    messages.append({"role": "assistant", "content": action})
    return {"messages": messages, "reward": float(reward)} if reward >= 1.0 else None


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
