"""Checkpoints: a model folder (safetensors + tokenizer) that `--model` loads, plus what `--resume` needs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from agentrl.agent_train.config import TrainConfig


def save_checkpoint(
    folder: Path, policy: Any, tokenizer: Any, optimizer: Any, step: int, cfg: TrainConfig
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    torch.save(optimizer.state_dict(), folder / "optimizer.pt")
    (folder / "trainer_state.json").write_text(json.dumps({"step": step, "config": cfg.to_dict()}, indent=2))
    return folder


def load_resume_state(folder: Path, optimizer: Any) -> int:
    optimizer.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=True))
    return int(json.loads((folder / "trainer_state.json").read_text())["step"])
