"""The training recipes the training benches share, one per env: the starting policy, its SFT stage,
GRPO's settings.

Not a benchmark itself (tests/bench runs every other `bench/*.py` in its quick mode):
`bench/two_stage.py` (base, then SFT on oracle episodes, then GRPO) and `bench/credit.py` (one GRPO
run per credit mode from one SFT checkpoint) train the same policy on the same episodes, so what
they must agree on is written once here: the env and the slice of it a recipe trains on, the model
loaded by its spec, the SFT run's settings on the oracle's episodes (train split), the GRPO settings
both start from, and the two-proportion z they report. The benches import it as they import each
other, with their own folder on `sys.path`.

- `search`: Search-v0's synthetic world, two searches then a turn that must answer.
- `flights`: Flights-v0 at its coarse granularity (one tool call searches, picks and books under the
  request's constraints, so the skill is reading the request and the policy, not ranking 40 rows in
  context) with the compact observation (about 700 SmolLM2 tokens), level 1 of every family.
  Episodes are 3 or 4 turns and 1,000 to 1,650 tokens.

Each recipe's SFT stage is small on purpose, so that GRPO starts with room: on Flights-v0, 256 oracle
episodes over 2 epochs left 0.865 held out and half of GRPO's groups all solved (nothing to learn
from), while the recipe's 64 episodes, one epoch of 16 steps, leave 0.350 on 60 held-out episodes
(SmolLM2-135M on a CPU), from 0.80 (`cheapest`) to 0.00 (`change_earlier`) by family. The slice stays
level 1, not level 2 or the default granularity: its episodes cost what they did (the GPU call's
budget holds), and what SFT leaves is already a spread of families for GRPO to close.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from agentrl.agent_train.config import TrainConfig
from agentrl.agent_train.models import load_model, load_pretrained
from agentrl.agent_train.sft import SFTConfig


@dataclass(frozen=True)
class SFTStage:
    """The SFT stage GRPO starts from: the oracle's episodes on train seeds `0..episodes-1`, `epochs`
    passes over them, `batch` episodes an optimizer step at learning rate `lr`. Kept small on
    purpose: GRPO learns only from groups whose rollouts disagree, so the stage must leave room."""

    episodes: int
    epochs: int = 1
    lr: float = 2e-4
    batch: int = 4


@dataclass(frozen=True)
class Recipe:
    """One env's training slice: what the SFT data, the rollouts and the evaluations all use."""

    name: str
    env: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    max_tokens: int = 768  # an episode's tokens, prompt included: SFT's cut and GRPO's budget alike
    max_new_tokens: int = 24  # tokens a turn may generate
    about: str = ""  # the slice, for table titles
    sft: SFTStage = SFTStage(32)

    def export_sft(self, path: Path, episodes: int) -> dict[str, int]:
        """The oracle's successful episodes on train seeds 0..episodes-1 as chat JSONL at `path`;
        returns counts with at least `written`."""
        if self.name == "search":
            from agentrl.agent_train.search_oracle import export_search_sft

            return export_search_sft(path, range(episodes), self.env_kwargs, split="train")
        from agentrl.demo import export_oracle_jsonl

        written = export_oracle_jsonl(path, episodes, env_kwargs={**self.env_kwargs, "split": "train"})
        return {"seeds": episodes, "written": written}


RECIPES = {
    "search": Recipe(
        "search", "agentrl/Search-v0", {"max_turns": 2}, 768, 24, "synthetic world", SFTStage(32)
    ),
    "flights": Recipe(
        "flights",
        "agentrl/Flights-v0",
        {"observation": "compact", "granularity": "coarse", "levels": [1]},
        1792,
        160,
        "compact observation, coarse tools, level 1 of every family",
        SFTStage(64),
    ),
}


def z_score(p1: float, n1: int, p2: float, n2: int) -> float:
    """Two-proportion z of the second success rate over the first."""
    pooled = (p1 * n1 + p2 * n2) / (n1 + n2)
    se = math.sqrt(max(pooled * (1 - pooled), 1e-12) * (1 / n1 + 1 / n2))
    return (p2 - p1) / se


def starting_policy(model_spec: str, recipe: Recipe, device: str = "cpu") -> tuple[Any, Any]:
    """(policy, tokenizer): a `tiny:...` model built for the env's texts, or a pretrained one, in
    float32 on `device`."""
    if model_spec.startswith("tiny"):
        return load_model(model_spec, recipe.env, device, 0, **recipe.env_kwargs)
    return load_pretrained(model_spec, device, dtype=torch.float32)


def add_sft_arguments(parser: argparse.ArgumentParser) -> None:
    """The SFT stage's options; each left out keeps the recipe's value (`sft_stage`)."""
    parser.add_argument("--sft-episodes", type=int, default=None, help="oracle episodes (train split)")
    parser.add_argument("--sft-epochs", type=int, default=None)
    parser.add_argument("--sft-lr", type=float, default=None)
    parser.add_argument("--sft-batch", type=int, default=None, help="episodes per SFT optimizer step")


def sft_stage(recipe: Recipe, args: argparse.Namespace, quick: bool) -> SFTStage:
    """The recipe's SFT stage with the options given on the command line (`--quick`: 16 episodes)."""
    given = {"episodes": args.sft_episodes or (16 if quick else None), "epochs": args.sft_epochs,
             "lr": args.sft_lr, "batch": args.sft_batch}
    return replace(recipe.sft, **{k: v for k, v in given.items() if v is not None})


def sft_config(recipe: Recipe, stage: SFTStage, data: Path, out_dir: Path, device: str = "cpu") -> SFTConfig:
    """SFT on the oracle's episodes in `data` (`Recipe.export_sft`), cut at the recipe's tokens."""
    return SFTConfig(
        data=str(data),
        out_dir=str(out_dir),
        epochs=stage.epochs,
        lr=stage.lr,
        micro_batch=stage.batch,
        max_tokens=recipe.max_tokens,
        env=recipe.env,
        device=device,
    )


def grpo_config(model_spec: str, recipe: Recipe, device: str = "cpu", **settings: Any) -> TrainConfig:
    """GRPO as both benches run it: the recipe's tokens a turn within its episode budget,
    micro-batches of 4, one held-out sample per task, sampling in float32 (about twice as fast on a
    CPU as float64), no TensorBoard or plot; `settings` set the rest."""
    return TrainConfig(
        env=recipe.env,
        env_kwargs=recipe.env_kwargs,
        model=model_spec,
        device=device,
        max_new_tokens=recipe.max_new_tokens,
        token_budget=recipe.max_tokens,
        micro_batch=4,
        eval_k=1,
        exact_sampling=False,
        tensorboard=False,
        plot=False,
        **settings,
    )
