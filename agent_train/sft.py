"""`agent-train sft`: supervised warm-up on oracle trajectories, before GRPO.

GRPO cannot start where every group earns the same reward (zero variance, zero gradient), which
is where a small model starts on most agentic envs. A few epochs of cross-entropy on successful
oracle episodes put it where rewards vary. The episodes are tokenized exactly as rollouts are
(`Transcript`: chat template, env turns appended as rendered, each assistant turn closed by the
turn-end token) and trained with the same token-origin mask: only what the assistant says is
learned, never the env's text. The checkpoint it writes is a model folder `agent-train --model`
starts from.

Data: JSONL, one episode a line, `{"messages": [...]}` with user/assistant (and system) turns
whose text is exactly what the env and the model exchange. Lines in OpenAI tool-call form
(`agentrl demo --sft`) are converted: `tool_calls` become agentrl's `<tool_call>` text and the
tool results one user turn of `<tool_response>` blocks. A line may also be a trajectory record
(`agentrl.trajectory/1`: `env.trajectory()`, `agentrl demo --trajectories`): its episode and
each of its forks become the messages the env and the model exchanged. Episodes whose return is
known (a record's rewards, a line's "reward") and below `min_return` are dropped: a file of
records holds failures too.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agentrl.agent_train.backends import turn_end_ids
from agentrl.agent_train.transcript import Transcript


@dataclass
class SFTConfig:
    data: str = ""  # JSONL of episodes
    model: str = "smollm2"  # a directory, a .gguf file, "smollm2" or "tiny:LAYERSxHIDDEN"
    env: str = "agentrl/Search-v0"  # only for "tiny:" models, whose tokenizer is trained on its texts
    out_dir: str = "runs/sft"
    epochs: int = 2
    lr: float = 5e-5
    micro_batch: int = 8  # episodes per optimizer step
    pass_tokens: int = 2048  # padded tokens per forward/backward pass (bounds memory; gradients accumulate)
    max_tokens: int = 1024  # longer episodes are dropped (and counted)
    min_return: float = 1.0  # episodes with a known return below this are dropped (and counted)
    max_grad_norm: float = 1.0
    seed: int = 0
    device: str = "auto"
    progress: bool = True


def text_messages(episode: dict[str, Any]) -> list[dict[str, str]]:
    """The episode as plain role/content turns, converting OpenAI tool calls to agentrl's text form."""
    out: list[dict[str, Any]] = []  # with a "from_tool" mark while tool results are merged
    for m in episode["messages"]:
        role = m["role"]
        if role == "assistant" and m.get("tool_calls"):
            calls = [
                "<tool_call>"
                + json.dumps(
                    {"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
                )
                + "</tool_call>"
                for c in m["tool_calls"]
            ]
            out.append(
                {"role": "assistant", "content": ((m.get("content") or "") + "\n".join(calls)).strip()}
            )
        elif role == "tool":
            block = f"<tool_response>\n{m['content']}\n</tool_response>"
            if out and out[-1]["role"] == "user" and out[-1].get("from_tool"):
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block, "from_tool": True})
        else:
            out.append({"role": role, "content": m.get("content") or ""})
    return [{"role": m["role"], "content": m["content"]} for m in out]


def episodes_of(line: dict[str, Any]) -> list[tuple[list[dict[str, str]], float | None]]:
    """The episodes one JSONL line holds, each as (text turns, return; None where the line has none).

    A trajectory record gives its episode, then one per fork (the parent's steps up to the fork,
    then the fork's own), each as the transcript the env kept (`agentrl.core.trajectory`)."""
    from agentrl.core.trajectory import TRAJECTORY_FORMAT, transcript

    kind = line.get("format")
    if kind is None:
        return [(text_messages(line), line.get("reward"))]
    if kind != TRAJECTORY_FORMAT:
        raise ValueError(f"unknown episode format {kind!r}; expected {TRAJECTORY_FORMAT!r} or chat messages")
    return [(transcript(r), sum(step["reward"] for step in r["steps"])) for r in whole_episodes(line)]


def whole_episodes(
    record: dict[str, Any], before: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """A record and each fork in it as a record of a whole episode (a fork's steps follow the first
    `at_step` steps of its parent; `at_step` counts from the episode's start)."""
    steps = [*(before or []), *record["steps"]]
    out = [{**record, "steps": steps, "forks": []}]
    for fork in record.get("forks", []):
        out += whole_episodes(fork["trajectory"], steps[: fork["at_step"]])
    return out


def tokenize_episode(tokenizer: Any, messages: list[dict[str, str]]) -> Transcript:
    """Token ids and mask as a rollout of this episode would have them (assistant turns: mask 1)."""
    end = turn_end_ids(tokenizer)[-1]
    first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), None)
    if first is None or first == 0:
        raise ValueError("an episode needs a prompt and at least one assistant turn")
    t = Transcript(tokenizer)
    t.start(messages[:first])
    for m in messages[first:]:
        if m["role"] == "assistant":
            ids = [*tokenizer.encode(m["content"], add_special_tokens=False), end]
            t.add_generation(ids, [0.0] * len(ids), 0)
        elif not t.add_env_message(m["content"], role=m["role"]):
            break
    t.check()
    return t


def load_episodes(cfg: SFTConfig, tokenizer: Any, log: Any = print) -> list[Transcript]:
    kept, dropped = [], {"drift": 0, "too long": 0, "low return": 0}
    with Path(cfg.data).open(encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            for messages, gain in episodes_of(json.loads(line)):
                if gain is not None and gain < cfg.min_return:
                    dropped["low return"] += 1
                    continue
                t = tokenize_episode(tokenizer, messages)
                if t.drift:
                    dropped["drift"] += 1
                elif len(t.ids) > cfg.max_tokens:
                    dropped["too long"] += 1
                else:
                    kept.append(t)
    log(f"sft data: {len(kept)} episodes kept from {cfg.data}; dropped {dropped}")
    if not kept:
        raise ValueError(f"no usable episode in {cfg.data} (dropped: {dropped})")
    return kept


def sft(cfg: SFTConfig, policy: Any = None, tokenizer: Any = None, log: Any = print) -> dict[str, Any]:
    """Train on the data's assistant tokens; returns the losses and the checkpoint folder."""
    import torch

    from agentrl.agent_train.metrics import MetricsLog
    from agentrl.agent_train.models import load_model

    torch.manual_seed(cfg.seed)
    device = (
        "cuda" if cfg.device == "auto" and torch.cuda.is_available() else cfg.device.replace("auto", "cpu")
    )
    if policy is None:
        policy, tokenizer = load_model(cfg.model, cfg.env, device, cfg.seed)
    policy.to(device).train()
    episodes = load_episodes(cfg, tokenizer, log)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sft_config.json").write_text(json.dumps(asdict(cfg), indent=2))
    optimizer = torch.optim.AdamW(policy.parameters(), lr=cfg.lr, weight_decay=0.0)
    metrics = MetricsLog(out, tensorboard=False)
    rng = random.Random(cfg.seed)
    steps_per_epoch = -(-len(episodes) // cfg.micro_batch)
    bar = None
    if cfg.progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=cfg.epochs * steps_per_epoch, desc="SFT", unit="step")
    step, start = 0, time.perf_counter()
    for _ in range(cfg.epochs):
        order = list(range(len(episodes)))
        rng.shuffle(order)
        for b in range(0, len(order), cfg.micro_batch):
            batch = [episodes[i] for i in order[b : b + cfg.micro_batch]]
            loss, tokens = sft_step(
                policy, optimizer, batch, tokenizer.pad_token_id, cfg.max_grad_norm, device, cfg.pass_tokens
            )
            step += 1
            metrics.log(step, {"sft_loss": loss, "sft_tokens": float(tokens)})
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.3f}")
    if bar is not None:
        bar.close()
    folder = out / "checkpoint"
    policy.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    plot = metrics.plot(out / "sft_curves.png")
    metrics.close()
    log(f"sft: {step} steps in {time.perf_counter() - start:.0f} s; checkpoint {folder}")
    return {"checkpoint": str(folder), "metrics": metrics.rows, "episodes": len(episodes), "plot": str(plot)}


def sft_step(
    policy: Any,
    optimizer: Any,
    batch: list[Transcript],
    pad_id: int,
    max_grad_norm: float,
    device: str,
    pass_tokens: int = 2048,
) -> tuple[float, int]:
    """One optimizer step: mean cross-entropy over the batch's assistant tokens.

    The batch goes through in passes of at most `pass_tokens` padded tokens (one episode at least),
    gradients accumulated: a step's memory is one pass's activations, not the batch's (four
    1,300-token Flights-v0 episodes in one pass took 12.7 GB on a CPU). The output head runs only
    where a token is trained (`update.sequence_logprobs`, as a GRPO update does)."""
    import torch

    from agentrl.agent_train.update import sequence_logprobs, token_passes

    total = max(1.0, float(sum(sum(t.mask) for t in batch)))
    optimizer.zero_grad(set_to_none=True)
    loss_sum = 0.0
    for rows in token_passes([len(t.ids) for t in batch], pass_tokens):
        part = batch[rows]
        width = max(len(t.ids) for t in part)
        ids = torch.full((len(part), width), pad_id, dtype=torch.long)
        attention = torch.zeros_like(ids)
        mask = torch.zeros((len(part), width))
        for i, t in enumerate(part):
            ids[i, : len(t.ids)] = torch.tensor(t.ids)
            attention[i, : len(t.ids)] = 1
            mask[i, : len(t.ids)] = torch.tensor(t.mask, dtype=torch.float32)
        ids, attention, mask = ids.to(device), attention.to(device), mask.to(device)
        logp = sequence_logprobs(policy, ids, attention, mask, 1.0, autocast=False)
        loss = -(logp * mask).sum() / total
        loss.backward()
        loss_sum += float(loss.detach())
    torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
    optimizer.step()
    return loss_sum, int(total)

