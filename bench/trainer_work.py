"""What `bench/trainer.py` gives both trainers: the work (`Work`) and the starting weights (`prepare`).

Not a benchmark itself (tests/bench runs every other `bench/*.py` in its quick mode): the bench's
figures are only comparable if agent-train and TRL start from the same weights, tokenizer and chat
template and are given the same work, so both are built here, apart from the code that runs and
measures each trainer. The starting weights are taught a short format lesson first, to call one
fixed read-only tool (`CALL`): TRL ends a rollout at the first reply without a tool call, while an
agentrl env answers any text, so a policy that does not call tools would give the two trainers
different work (see `bench/trainer.py`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV = "agentrl/Flights-v0"
# the one call the starting policy is taught: valid for every task, never ends the episode
CALL = {"name": "search_flights", "arguments": {"origin": "PEK", "destination": "SHA", "date": "2026-04-17"}}


@dataclass(frozen=True)
class Work:
    """What both trainers are given; a field here is the same for both by construction."""

    model: str  # "smollm2" or "tiny"
    steps: int  # optimizer steps
    prompts: int  # tasks (env seeds) per step
    group_size: int  # rollouts per task
    micro_batch: int  # sequences per backward pass; a step accumulates prompts * group_size of them
    max_turns: int  # generations per episode
    max_new_tokens: int  # per turn
    budget: int  # token cap of an episode, set high enough that it never binds
    lr: float
    seed: int = 0
    temperature: float = 1.0
    clip_low: float = 0.2
    clip_high: float = 0.28

    @property
    def env_kwargs(self) -> dict[str, Any]:
        return {"levels": [1], "max_turns": self.max_turns}

    def seeds(self) -> list[int]:
        """The env seeds in the order both trainers take them: step s uses [s*prompts, (s+1)*prompts)."""
        return list(range(self.steps * self.prompts))


# ---------------------------------------------------------------------------------------------
# the starting weights: one model, one tokenizer, one chat template for both trainers
# ---------------------------------------------------------------------------------------------
def call_text() -> str:
    return "<tool_call>\n" + json.dumps(CALL) + "\n</tool_call>"


def call_pieces(width: int = 4) -> list[str]:
    """CALL's text cut into distinct pieces (the tiny tokenizer's added tokens), so that each piece
    has one successor: a model that only sees the current token can still spell the whole call."""
    text = call_text()
    while True:
        pieces = [text[i : i + width] for i in range(0, len(text), width)]
        if len(set(pieces)) == len(pieces):
            return pieces
        width += 1


def tiny_tokenizer(corpus: list[str]) -> Any:
    """A byte-level BPE learnt from the env's texts (any text round-trips: the full byte alphabet),
    plus CALL's pieces as added tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=4096,
            special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tokenizer.add_tokens([AddedToken(p, normalized=False, special=False) for p in call_pieces()])
    return tokenizer


def tiny_model(tokenizer: Any) -> Any:
    """A random-init 2-layer Llama whose attention writes nothing into the residual stream (zero
    output projections): each next token depends on the current token alone, however long the
    context, while every forward pass still computes attention over the whole context. Taught the
    chain of CALL's pieces on short prompt tails, it calls the tool after any prompt."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=1,
        num_key_value_heads=1,
        max_position_embeddings=32768,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
    return model


def first_prompts(work: Work, tokenizer: Any, seeds: list[int]) -> list[str]:
    """The first prompts as each trainer renders them: agent-train sends the env's observation (task
    and tool listing) as the user turn; TRL lists the tools in the system turn and the task as the
    user turn. Plus a second turn of each kind, after one call of CALL."""
    import gymnasium as gym

    import agentrl  # noqa: F401
    from agentrl.integrations.episode import task_text, tool_result

    env = gym.make(ENV, **work.env_kwargs)
    call = call_text()
    texts = []
    try:
        for seed in seeds:
            observation, info = env.reset(seed=seed, options={"split": "train"})
            reply = env.step(call)[0]
            agent = [{"role": "user", "content": observation}]
            trl = [{"role": "user", "content": task_text(observation)}]
            texts.append(tokenizer.apply_chat_template(agent, tokenize=False, add_generation_prompt=True))
            texts.append(
                tokenizer.apply_chat_template(
                    trl, tools=info["tools"], tokenize=False, add_generation_prompt=True
                )
            )
            agent += [{"role": "assistant", "content": call}, {"role": "user", "content": reply}]
            trl += [
                {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": CALL}]},
                {"role": "tool", "name": CALL["name"], "content": tool_result(reply)},
            ]
            texts.append(tokenizer.apply_chat_template(agent, tokenize=False, add_generation_prompt=True))
            texts.append(
                tokenizer.apply_chat_template(
                    trl, tools=info["tools"], tokenize=False, add_generation_prompt=True
                )
            )
    finally:
        env.close()
    return texts


def teach_tool_call(
    model: Any, tokenizer: Any, prompts: list[str], steps: int, lr: float, tail: int | None = None
) -> float:
    """AdamW steps of cross-entropy on CALL after each prompt (its last `tail` tokens only, for a
    model that cannot see further back); returns the last loss. Frozen parameters stay frozen."""
    import torch

    target = tokenizer.encode(call_text() + "<|im_end|>", add_special_tokens=False)
    rows = [tokenizer.encode(p, add_special_tokens=False)[-(tail or 0) :] for p in prompts]
    width = max(len(r) for r in rows) + len(target)
    ids = torch.full((len(rows), width), tokenizer.pad_token_id)
    labels = torch.full((len(rows), width), -100)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        n = len(r) + len(target)
        ids[i, :n] = torch.tensor(r + target)
        labels[i, len(r) : n] = torch.tensor(target)
        attention[i, :n] = 1
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    model.train()
    loss = float("nan")
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        step_loss = model(input_ids=ids, attention_mask=attention, labels=labels).loss
        step_loss.backward()
        optimizer.step()
        loss = float(step_loss.detach())
    model.eval()
    return loss


def prepare(work: Work, folder: Path) -> dict[str, Any]:
    """Build the starting weights both trainers load, with Qwen2.5's chat template (tool calling
    that TRL can parse, in the `<tool_call>` form agentrl's envs read)."""
    import torch
    from trl.chat_template_utils import qwen2_5_chat_template

    torch.manual_seed(work.seed)
    if work.model == "tiny":
        from agentrl.agent_train.models import env_corpus

        corpus = [*env_corpus(ENV, **work.env_kwargs), qwen2_5_chat_template, json.dumps(CALL)]
        tokenizer = tiny_tokenizer(corpus)
        tokenizer.chat_template = qwen2_5_chat_template
        model = tiny_model(tokenizer)
        for layer in model.model.layers:  # the lesson keeps attention out of the residual stream
            layer.self_attn.o_proj.weight.requires_grad_(False)
        lesson = {"steps": 400, "lr": 1e-2, "tail": 4}
    else:
        from agentrl.agent_train.models import load_pretrained

        model, tokenizer = load_pretrained(work.model, "cpu", dtype=torch.float32)
        tokenizer.chat_template = qwen2_5_chat_template
        # the prompts' last tokens are enough for a pretrained model to learn what follows its turn header
        lesson = {"steps": 16, "lr": 3e-4, "tail": 256}
    start = time.perf_counter()
    prompts = first_prompts(work, tokenizer, [10_000])
    loss = teach_tool_call(model, tokenizer, prompts, **lesson)
    model.requires_grad_(True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return {
        "lesson_steps": lesson["steps"],
        "lesson_loss": loss,
        "lesson_s": time.perf_counter() - start,
        "params": sum(p.numel() for p in model.parameters()),
        # first prompts as each trainer renders them (tools in the user turn / in the system turn)
        "prompt_tokens": {
            "agent-train": len(tokenizer.encode(prompts[0], add_special_tokens=False)),
            "trl": len(tokenizer.encode(prompts[1], add_special_tokens=False)),
        },
    }
