"""The policy update computes what the two-pass, full-logits update computed, with less work.

`two_pass_update.reference_optimize` is that earlier computation (a no_grad pass for the old
logprobs, then the loss pass, both with logits at every position); `update.optimize` must give the
same loss, gradients and stats on the same batch, whichever path it takes (one pass or two, head on
the trained positions or full logits).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from transformers import Gemma2Config, Gemma2ForCausalLM, LlamaConfig, LlamaForCausalLM
from two_pass_update import full_logprobs, reference_optimize

from agentrl.agent_train.config import TrainConfig
from agentrl.agent_train.update import has_dropout, optimize, output_head, sequence_logprobs


def tiny_llama(vocab: int = 128, kv_heads: int = 4, seed: int = 0, **extra: Any) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=kv_heads, max_position_embeddings=512,
                         tie_word_embeddings=True, pad_token_id=0, bos_token_id=None, eos_token_id=1, **extra)
    return LlamaForCausalLM(config)


def tiny_smollm2_architecture() -> LlamaForCausalLM:
    """SmolLM2-135M's architecture (Llama, grouped KV heads 3:1, tied 49152-token vocabulary,
    rope_theta 1e5) at a random-init size that runs in a second."""
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=49152, hidden_size=48, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=3, num_key_value_heads=1, max_position_embeddings=512,
                         rope_parameters={"rope_type": "default", "rope_theta": 100000.0}, rms_norm_eps=1e-5,
                         tie_word_embeddings=True, pad_token_id=2, bos_token_id=1, eos_token_id=2)
    return LlamaForCausalLM(config)


def tiny_gemma2() -> Gemma2ForCausalLM:
    """Softcapped logits after the head: no separable head, the full-logits fallback."""
    torch.manual_seed(0)
    config = Gemma2Config(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                          max_position_embeddings=512, final_logit_softcapping=5.0,
                          pad_token_id=0, bos_token_id=None, eos_token_id=1)
    return Gemma2ForCausalLM(config)


def make_batch(model: Any, n: int = 5, seed: int = 1, per_token_adv: bool = False) -> dict[str, torch.Tensor]:
    """Right-padded sequences of different lengths, each with two trained spans (two turns); behaviour
    logprobs those of the model plus noise, so the importance weights vary and some hit the cap."""
    g = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    lengths = [40, 33, 27, 40, 21][:n]
    width = max(lengths)
    ids = torch.randint(3, vocab, (n, width), generator=g)
    attention = torch.zeros((n, width), dtype=torch.long)
    mask = torch.zeros((n, width))
    for i, m in enumerate(lengths):
        ids[i, m:] = 0
        attention[i, :m] = 1
        mask[i, 8:14] = 1.0  # first turn's reply
        mask[i, m - 6 : m] = 1.0  # last turn's reply
    with torch.no_grad():
        true = full_logprobs(model.eval(), ids, attention, TrainConfig(temperature=0.8), [])
    behav = torch.where(mask > 0, true + 0.5 * torch.randn(true.shape, generator=g), 0.0)
    adv = torch.randn((n, width) if per_token_adv else (n,), generator=g)
    return {"ids": ids, "attention": attention, "mask": mask, "behav_logp": behav,
            "versions": torch.zeros((n, width), dtype=torch.long), "adv": adv}


def run_both(model: Any, cfg: TrainConfig, batch: dict[str, torch.Tensor], with_ref: bool = False,
             suppress: list[int] | None = None):
    """Run the reference and `optimize` on two copies of `model`; return both stats and both models."""
    suppress = suppress or []
    a, b = copy.deepcopy(model), copy.deepcopy(model)
    ref = copy.deepcopy(model).eval().requires_grad_(False) if with_ref else None
    if ref is not None:
        with torch.no_grad():  # a reference that differs from the policy, so the KL term is not 0
            for p in ref.parameters():
                p.add_(0.05 * torch.randn_like(p))
    opt_a = torch.optim.SGD(a.parameters(), lr=0.5)
    opt_b = torch.optim.SGD(b.parameters(), lr=0.5)
    expected = reference_optimize(a, ref, opt_a, batch, cfg, suppress)
    got = optimize(b, ref, opt_b, batch, cfg, autocast=False, suppress=suppress)
    return expected, got, a, b


def assert_same(expected: dict[str, float], got: dict[str, float], a: Any, b: Any) -> None:
    assert got.keys() == expected.keys()
    for k in expected:
        assert got[k] == pytest.approx(expected[k], rel=1e-4, abs=1e-6), k
    for (name, pa), pb in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.allclose(pa.grad, pb.grad, rtol=1e-4, atol=1e-6), name
        assert torch.allclose(pa, pb, rtol=1e-4, atol=1e-6), name


@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean", "constant"])
def test_one_pass_equals_the_two_pass_full_logits_update(aggregation):
    model = tiny_llama()
    batch = make_batch(model)
    cfg = TrainConfig(aggregation=aggregation, micro_batch=2, temperature=0.8, max_new_tokens=16, is_cap=1.5,
                      max_grad_norm=1e9)
    expected, got, a, b = run_both(model, cfg, batch)
    assert 0.0 < got["is_weight_mean"] < 1.5 and got["logprob_mismatch"] > 0.1  # weights vary, some capped
    assert got["ratio_mean"] == 1.0  # the old logprobs are the loss pass's own
    assert_same(expected, got, a, b)


def test_kl_per_token_advantages_and_suppressed_ids_match():
    model = tiny_llama()
    batch = make_batch(model, per_token_adv=True)
    cfg = TrainConfig(micro_batch=3, temperature=0.8, kl_coef=0.1, max_new_tokens=16, max_grad_norm=0.5)
    # make_batch's ids start at 3: the suppressed ids are never among the sampled tokens
    expected, got, a, b = run_both(model, cfg, batch, with_ref=True, suppress=[0, 1, 2])
    assert got["kl"] > 0
    assert_same(expected, got, a, b)


@pytest.mark.parametrize("epochs, recompute", [(2, True), (1, False)])
def test_two_pass_paths_match_with_trained_positions_only(epochs, recompute):
    """Several epochs (the policy moves between passes) or behaviour logprobs as old: no one-pass
    shortcut, but the head still runs only on trained positions."""
    model = tiny_llama()
    batch = make_batch(model)
    cfg = TrainConfig(micro_batch=2, temperature=0.8, epochs_per_step=epochs, recompute_logprobs=recompute,
                      max_new_tokens=16, max_grad_norm=1e9)
    expected, got, a, b = run_both(model, cfg, batch)
    if epochs == 2:
        assert got["ratio_mean"] != pytest.approx(1.0, abs=1e-4)  # the second epoch ran a moved policy
    assert_same(expected, got, a, b)


def test_smollm2_architecture_matches():
    model = tiny_smollm2_architecture()
    assert output_head(model) is model.lm_head
    batch = make_batch(model, n=4)
    cfg = TrainConfig(micro_batch=3, temperature=0.7, max_new_tokens=16, max_grad_norm=1.0)
    expected, got, a, b = run_both(model, cfg, batch, suppress=[0, 1])
    assert_same(expected, got, a, b)


def test_a_model_without_a_separable_head_falls_back_to_full_logits():
    model = tiny_gemma2()
    assert output_head(model) is None
    batch = make_batch(model, n=4)
    cfg = TrainConfig(micro_batch=2, temperature=0.8, max_new_tokens=16, max_grad_norm=1e9)
    expected, got, a, b = run_both(model, cfg, batch)
    assert_same(expected, got, a, b)


def test_logprobs_only_at_trained_positions():
    model = tiny_llama().eval()
    batch = make_batch(model)
    with torch.no_grad():
        full = full_logprobs(model, batch["ids"], batch["attention"], TrainConfig(temperature=0.8), [1])
        part = sequence_logprobs(model, batch["ids"], batch["attention"], batch["mask"], 0.8, False, [1])
    m = batch["mask"] > 0
    assert part.shape == full.shape
    assert torch.allclose(part[m], full[m], atol=1e-5)
    assert (part[~m] == 0).all()


def count_body_passes(model: Any) -> list[int]:
    calls = [0]
    model.base_model.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    return calls


def test_a_model_with_dropout_keeps_the_separate_old_logprob_pass():
    """In train mode dropout makes the loss pass a different function from the eval-mode policy;
    its own detached logprobs would give ratio 1 exactly, hiding the difference."""
    plain, dropped = tiny_llama(), tiny_llama(attention_dropout=0.3)
    assert not has_dropout(plain) and has_dropout(dropped)
    for model, passes in ((plain, 1), (dropped, 2)):
        batch = make_batch(model, n=4)
        calls = count_body_passes(model)
        cfg = TrainConfig(micro_batch=2, temperature=0.8, max_new_tokens=16)
        model.eval()
        stats = optimize(model, None, torch.optim.SGD(model.parameters(), lr=0.0), batch, cfg, False, [])
        assert calls[0] == passes * 2  # two micro-batches, one or two passes each
        if passes == 2:
            assert stats["ratio_mean"] != 1.0  # train-mode dropout against eval-mode old logprobs
