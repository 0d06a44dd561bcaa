"""Generators: the turn-end token, and vLLM logprobs that must be those of the sampled distribution."""

from __future__ import annotations

import copy
import sys
import types

import pytest

from agentrl.agent_train.backends import HFBackend, never_sampled_ids, turn_end_ids


def test_a_turn_can_end_on_the_template_token_when_eos_is_another(toy_tokenizer, toy_model):
    tok = copy.deepcopy(toy_tokenizer)
    tok.eos_token = "<|pad|>"  # like Qwen: eos <|endoftext|>, turns closed by <|im_end|>
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert set(turn_end_ids(tok)) == {tok.eos_token_id, im_end}
    assert im_end not in never_sampled_ids(tok)
    backend = HFBackend(toy_model, tok)
    assert im_end in backend.stop_ids and im_end not in backend.suppress_ids
    # the toy tokenizer's own eos is <|im_end|>: one turn-end id
    assert turn_end_ids(toy_tokenizer) == [im_end]


class _OldLLM:
    """A vLLM engine from before `logprobs_mode`."""

    def __init__(self, **kwargs):
        if "logprobs_mode" in kwargs:
            raise TypeError("LLM.__init__() got an unexpected keyword argument 'logprobs_mode'")
        self.kwargs = kwargs


@pytest.fixture()
def old_vllm(monkeypatch):
    fake = types.ModuleType("vllm")
    fake.LLM, fake.SamplingParams = _OldLLM, dict
    monkeypatch.setitem(sys.modules, "vllm", fake)


def test_a_vllm_without_processed_logprobs_is_refused_unless_they_equal_raw_ones(old_vllm, toy_tokenizer):
    from agentrl.agent_train.vllm_backend import VLLMBackend

    with pytest.raises(RuntimeError, match="importance ratio"):
        VLLMBackend("model-dir", toy_tokenizer, temperature=0.7)
    with pytest.raises(RuntimeError, match=r"top_p 0\.9"):
        VLLMBackend("model-dir", toy_tokenizer, top_p=0.9)
    # at temperature 1 and top_p 1 raw logprobs are the sampled distribution's: allowed
    backend = VLLMBackend("model-dir", toy_tokenizer, temperature=1.0)
    assert "logprobs_mode" not in backend.llm.kwargs
