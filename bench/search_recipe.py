"""The Search-v0 recipe the training benches share: the starting policy, its SFT stage, GRPO's settings.

Not a benchmark itself (tests/bench runs every other `bench/*.py` in its quick mode):
`bench/two_stage.py` (base, then SFT on oracle episodes, then GRPO) and `bench/credit.py` (one GRPO
run per credit mode from one SFT checkpoint) train the same policy on the same episodes, so what
they must agree on is written once here: the model loaded by its spec, the SFT run's settings on
the oracle's episodes, the GRPO settings both start from, and the two-proportion z they report.
The benches import it as they import each other, with their own folder on `sys.path`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from agentrl.agent_train.config import TrainConfig
from agentrl.agent_train.models import load_model, load_pretrained
from agentrl.agent_train.sft import SFTConfig

ENV = "agentrl/Search-v0"
MAX_TOKENS = 768  # an episode's tokens, prompt included: SFT's cut and GRPO's budget alike


def z_score(p1: float, n1: int, p2: float, n2: int) -> float:
    """Two-proportion z of the second success rate over the first."""
    pooled = (p1 * n1 + p2 * n2) / (n1 + n2)
    se = math.sqrt(max(pooled * (1 - pooled), 1e-12) * (1 / n1 + 1 / n2))
    return (p2 - p1) / se


def starting_policy(model_spec: str, env_kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """(policy, tokenizer): a `tiny:...` model built for the env's texts, or a pretrained one, on
    the CPU in float32."""
    if model_spec.startswith("tiny"):
        return load_model(model_spec, ENV, "cpu", 0, **env_kwargs)
    return load_pretrained(model_spec, "cpu", dtype=torch.float32)


def sft_config(data: Path, out_dir: Path, *, epochs: int, lr: float, micro_batch: int) -> SFTConfig:
    """SFT on the oracle's episodes in `data` (`export_search_sft`), cut at `MAX_TOKENS`."""
    return SFTConfig(data=str(data), out_dir=str(out_dir), epochs=epochs, lr=lr, micro_batch=micro_batch,
                     max_tokens=MAX_TOKENS)


def grpo_config(model_spec: str, env_kwargs: dict[str, Any], **settings: Any) -> TrainConfig:
    """GRPO on Search-v0 as both benches run it: on the CPU, 24 new tokens a turn within
    `MAX_TOKENS`, micro-batches of 4, one held-out sample per task, sampling in float32 (about twice
    as fast on a CPU as float64), no TensorBoard or plot; `settings` set the rest."""
    return TrainConfig(env=ENV, env_kwargs=env_kwargs, model=model_spec, device="cpu", max_new_tokens=24,
                       token_budget=MAX_TOKENS, micro_batch=4, eval_k=1, exact_sampling=False,
                       tensorboard=False, plot=False, **settings)
