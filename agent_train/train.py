"""`agent-train`'s GRPO run, top to bottom, as CleanRL writes a training loop.

    build the model, the generator and the envs
    for each update:
        collect groups (rolled out one step ahead, in a background event loop)
        advantages, per episode or per turn (`--credit`)   <- `assign_credit`: where credit is assigned
        samples -> padded batch -> clipped masked loss -> optimizer step   (`update.py`, `grpo.py`)
        push the weights to the generator
        log, evaluate on the held-out split
        checkpoint

How losses and advantages are aggregated (token or sequence means, std or mean baselines) is
`grpo.py`'s; rollouts are `rollout.py`'s (the episode driver, over Gymnasium or the HTTP client).
`--credit episode` is plain GRPO; `anchor` and `branch` give each turn its own advantage, and
`branch` also forks the rollouts (its groups are collected by `credit.groups_collector`).
A run is reproducible from its config: the seed fixes the init, the env seeds and every sampled
token (per-request seeds), and weights are pushed between rollout steps, never during one, so
step s's rollouts always see policy version s - max_staleness.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from agentrl.agent_train.accounting import FailureGuard, TaskLedger, TrainingAborted, split_kwargs
from agentrl.agent_train.backends import GenerationBackend, HFBackend
from agentrl.agent_train.checkpoints import load_resume_state, save_checkpoint
from agentrl.agent_train.config import TrainConfig
from agentrl.agent_train.credit import assign_credit
from agentrl.agent_train.producer import RolloutProducer, eval_seeds, train_seeds
from agentrl.agent_train.rollout import RolloutEpisode, RolloutLimits, Rollouts, driver_factory
from agentrl.agent_train.update import build_batch, optimize, select_samples

if TYPE_CHECKING:
    from agentrl.agent_train.metrics import MetricsLog

# where they were before the loop's parts had modules of their own
__all__ = ["RolloutProducer", "build_batch", "eval_seeds", "make_backend", "optimize", "reference_model",
           "rollout_specs", "select_samples", "train", "train_seeds"]


def train(
    cfg: TrainConfig,
    policy: Any = None,
    tokenizer: Any = None,
    backend: GenerationBackend | None = None,
    log: Any = print,
) -> dict[str, Any]:
    """Run GRPO per `cfg`; `policy`/`tokenizer`/`backend` may be passed in (tests, benchmarks).

    Raises `TrainingAborted` (naming the cause) when too many episodes fail, when steps in a row
    train on nothing, or when an evaluation task shows up in training."""
    # --- the model, its optimizer, the generator and the envs ------------------------------------
    run = _Run.build(cfg, policy, tokenizer, backend, log)
    policy, tokenizer, optimizer, backend = run.policy, run.tokenizer, run.optimizer, run.backend
    producer, guard = run.producer, run.guard
    result: dict[str, Any] = {"out_dir": str(run.out)}
    try:
        if cfg.eval_seeds:
            result["eval_before"] = run.logged_eval(run.start_step, "eval before")
        producer.start(run.start_step, cfg.steps)
        bar = _progress(cfg, run.start_step)
        generated = 0  # tokens generated so far, forks included (`--gen-token-budget`)
        done = run.start_step  # steps taken: cfg.steps unless a budget stopped the run first
        started = time.perf_counter()
        for step in range(run.start_step, cfg.steps):
            t0 = time.perf_counter()
            # --- collect: this step's groups, one per env seed -----------------------------------
            _, groups, timing = producer.get()
            flat = [e for g in groups for e in g]
            row = episode_metrics(groups)
            row.update(guard.check_episodes(f"step {step}", flat))
            run.ledger.add_train(flat)

            # --- advantages: per episode (GRPO) or per turn, and what is trained on ---------------
            credit = assign_credit(cfg, groups, step)  # episode, anchor or branch: see credit.py
            row.update(credit.metrics)
            chosen, chosen_adv, stale = select_samples(
                credit.samples, credit.advantages, credit.keep, step, cfg.max_staleness
            )
            guard.check_trained(
                step,
                len(chosen),
                f"{int(row['excluded'])} excluded, {row['zero_var_groups']:.0%} of groups with equal "
                f"rewards, {stale} too stale",
            )
            row.update(sample_metrics(flat, step, stale, len(chosen), timing))

            # --- loss and optimizer step, then the new weights to the generator ------------------
            t_train = time.perf_counter()
            if chosen:
                batch = build_batch(chosen, chosen_adv, tokenizer.pad_token_id)
                losses = optimize(policy, run.ref, optimizer, batch, cfg, run.autocast, backend.suppress_ids)
                row.update(losses)
            producer.wait_collected(min(step + cfg.max_staleness, cfg.steps - 1))
            backend.update_weights({k: v.detach() for k, v in policy.state_dict().items()}, step + 1)
            producer.set_version(step + 1)
            row.update(train_s=time.perf_counter() - t_train, step_s=time.perf_counter() - t0)

            # --- log and evaluate, checkpoint ----------------------------------------------------
            run.end_step(step, row, bar)
            generated += int(timing["gen_tokens"])
            done = step + 1
            if run.budget_spent(done, generated, started):
                break  # a job with a budget keeps its last evaluation and checkpoint
        if bar is not None:
            bar.close()

        # --- the run's end: a last evaluation, the task ledger, the final checkpoint -------------
        result.update(run.finish(done))
    except TrainingAborted as exc:
        log(f"agent-train stopped: {exc}")
        raise
    finally:
        producer.close()
        run.metrics.close()
    result["metrics"] = run.metrics.rows
    result["steps"] = done
    return result


# ---------------------------------------------------------------------------------------------
# the loop's parts
# ---------------------------------------------------------------------------------------------
@dataclass
class _Run:
    """What a run holds from its setup to its end, and the steps of `train` that are not the update:
    setup, evaluation, per-step logging and checkpoints, the budgets, the run's end."""

    cfg: TrainConfig
    out: Path
    policy: Any
    tokenizer: Any
    optimizer: torch.optim.Optimizer
    ref: Any | None  # the KL anchor (`reference_model`)
    backend: GenerationBackend
    producer: RolloutProducer
    metrics: MetricsLog
    guard: FailureGuard
    ledger: TaskLedger
    start_step: int
    autocast: bool
    log: Any

    @classmethod
    def build(
        cls, cfg: TrainConfig, policy: Any, tokenizer: Any, backend: GenerationBackend | None, log: Any
    ) -> _Run:
        """The model (loaded unless passed in), its optimizer (resumed if asked), the reference, the
        generator with the current weights, the rollout producer, the logs; the config written."""
        from agentrl.agent_train.allocator import map_large_allocations
        from agentrl.agent_train.metrics import MetricsLog
        from agentrl.agent_train.models import load_model, pick_device

        map_large_allocations()  # freed caches and activations go back to the system (allocator.py)
        torch.manual_seed(cfg.seed)
        device = pick_device(cfg.device)
        if policy is None:
            policy, tokenizer = load_model(
                cfg.resume or cfg.model, cfg.env, device, cfg.seed, **cfg.env_kwargs
            )
        policy.to(device)
        out = Path(cfg.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2))
        optimizer = torch.optim.AdamW(policy.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        start_step = load_resume_state(Path(cfg.resume), optimizer) if cfg.resume else 0
        ref = reference_model(cfg, policy, device)
        if backend is None:
            backend = make_backend(cfg, policy, tokenizer, device)
        backend.update_weights(policy.state_dict(), start_step)
        producer = RolloutProducer(cfg, *rollout_specs(cfg, backend, tokenizer, log))
        producer.set_version(start_step)
        metrics = MetricsLog(out, tensorboard=cfg.tensorboard)
        guard = FailureGuard(cfg.max_idle_steps, cfg.max_excluded_frac, log)
        autocast = cfg.bf16 and device.startswith("cuda")
        return cls(cfg, out, policy, tokenizer, optimizer, ref, backend, producer, metrics, guard,
                   TaskLedger(), start_step, autocast, log)

    def evaluate(self, step: int, name: str) -> dict[str, float]:
        """The held-out split's scores, its failures checked and its tasks put in the ledger."""
        scores, episodes = self.producer.evaluate(eval_seeds(self.cfg), self.cfg.eval_k)
        scores.update(
            {f"eval_{k}": v for k, v in self.guard.check_episodes(f"eval at step {step}", episodes).items()}
        )
        self.ledger.add_eval(episodes)
        self.log(f"{name} (step {step}, split {self.cfg.eval_split or 'none'}): {scores}")
        return scores

    def logged_eval(self, step: int, name: str) -> dict[str, float]:
        """An evaluation on a metrics row of its own (before and after the run)."""
        scores = self.evaluate(step, name)
        self.metrics.log(step, scores)
        return scores

    def end_step(self, step: int, row: dict[str, float], bar: Any) -> None:
        """After an update: a periodic evaluation (not at the last step: the run's end has one), the
        step's metrics row, a periodic checkpoint, the progress bar."""
        cfg = self.cfg
        if cfg.eval_every and (step + 1) % cfg.eval_every == 0 and step + 1 < cfg.steps:
            row.update(self.evaluate(step + 1, "eval"))
        self.metrics.log(step + 1, row)
        if cfg.save_every and (step + 1) % cfg.save_every == 0:
            save_checkpoint(self.out / f"checkpoint-{step + 1}", self.policy, self.tokenizer, self.optimizer,
                            step + 1, cfg)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(reward=f"{row['reward_mean']:.3f}", succ=f"{row['success_rate']:.2f}")

    def budget_spent(self, done: int, generated: int, started: float) -> bool:
        """Whether the generated-token budget (equal tokens across credit modes, however many steps
        that takes) or the wall budget is spent; the wall's is said."""
        cfg = self.cfg
        if cfg.gen_token_budget and generated >= cfg.gen_token_budget:
            return True
        if cfg.max_wall_s and time.perf_counter() - started >= cfg.max_wall_s:
            self.log(
                f"agent-train: {done} of {cfg.steps} steps in {time.perf_counter() - started:.0f} s, "
                f"the wall budget (--max-wall-s {cfg.max_wall_s:g}) spent"
            )
            return True
        return False

    def finish(self, done: int) -> dict[str, Any]:
        """The run's end after `done` steps: a last evaluation, the task ledger (logged), the final
        checkpoint and the plot, as the result's entries."""
        cfg = self.cfg
        result: dict[str, Any] = {}
        if cfg.eval_seeds:
            result["eval_after"] = self.logged_eval(done, "eval after")
        result["tasks"] = tasks = self.ledger.summary()
        self.log(
            f"tasks: train {tasks['train_tasks']} (split {cfg.train_split or 'none'}), "
            f"eval {tasks['eval_tasks']} (split {cfg.eval_split or 'none'}), "
            f"overlap {tasks['overlap']}"
            + ("" if self.ledger.train or self.ledger.eval
               else " (the env names no tasks: info has no task_id)")
        )
        final = save_checkpoint(self.out / f"checkpoint-{done}", self.policy, self.tokenizer, self.optimizer,
                                done, cfg)
        result["checkpoint"] = str(final)
        if cfg.plot:
            result["plot"] = str(self.metrics.plot(self.out / "curves.png"))
        return result


def sample_metrics(flat: list[RolloutEpisode], step: int, stale: int, trained: int,
                   timing: dict[str, float]) -> dict[str, float]:
    """How old the step's samples were, how many were trained on, and how fast they were collected."""
    lags = [step - v for e in flat
            for v, m in zip(e.transcript.versions, e.transcript.mask, strict=True) if m]
    return {
        "staleness_mean": float(np.mean(lags)) if lags else 0.0,
        "dropped_stale": float(stale),
        "trained_samples": float(trained),
        "rollout_s": timing["rollout_s"],
        "gen_tokens_per_s": timing["gen_tokens"] / max(timing["gen_busy_s"], 1e-9),
        "gen_tokens": float(timing["gen_tokens"]),  # every token generated, forks included
    }


def episode_metrics(groups: list[list[RolloutEpisode]]) -> dict[str, float]:
    flat = [e for g in groups for e in g]
    ok = [e for e in flat if e.excluded is None]
    rewards = np.array([e.reward for e in flat])
    gen = sum(e.transcript.generated_tokens for e in flat)
    total = sum(len(e.transcript.ids) for e in flat)
    return {
        "reward_mean": float(rewards.mean()),
        "reward_std": float(rewards.std()),
        "success_rate": float(np.mean([e.success for e in flat])),
        "group_reward_var": float(np.mean([np.var([e.reward for e in g]) for g in groups])),
        "zero_var_groups": float(np.mean([np.var([e.reward for e in g]) == 0 for g in groups])),
        "turns_mean": float(np.mean([e.turns for e in flat])),
        "tokens_generated": float(gen),
        "masked_frac": 1.0 - gen / max(total, 1),
        "excluded": float(len(flat) - len(ok)),
        "env_latency_s": float(np.mean([e.env_s / max(e.turns + 1, 1) for e in flat])),
    }


def rollout_specs(
    cfg: TrainConfig, backend: GenerationBackend, tokenizer: Any, log: Any = print
) -> tuple[Rollouts, Rollouts]:
    """The training and the evaluation side of a run: same generator and limits, each its split."""
    limits = RolloutLimits(cfg.max_new_tokens, cfg.token_budget, cfg.success_threshold)
    specs = []
    for split in (cfg.train_split, cfg.eval_split):
        kwargs, applied = split_kwargs(cfg.env, cfg.env_kwargs, split)
        if split and not applied:
            log(
                f"warning: {cfg.env} takes no split=: {split!r} cannot be applied, so evaluation is held "
                "out by seed only and its tasks may repeat training tasks (the overlap is logged when "
                "the env names its tasks)"
            )
        make_driver = driver_factory(cfg.env, cfg.env_url, **kwargs)
        specs.append(Rollouts(make_driver, backend, tokenizer, limits, cfg.concurrency, cfg.system_prompt))
    return specs[0], specs[1]


def reference_model(cfg: TrainConfig, policy: Any, device: str) -> Any | None:
    """The KL anchor: the model the run started from, also when resuming from a checkpoint."""
    if cfg.kl_coef <= 0:
        return None
    if cfg.resume:
        from agentrl.agent_train.models import load_model

        ref, _ = load_model(cfg.model, cfg.env, device, cfg.seed, **cfg.env_kwargs)
    else:
        ref = copy.deepcopy(policy)
    return ref.to(device).eval().requires_grad_(False)


def make_backend(cfg: TrainConfig, policy: Any, tokenizer: Any, device: str) -> GenerationBackend:
    if cfg.backend == "vllm":
        from agentrl.agent_train.vllm_backend import VLLMBackend

        return VLLMBackend.from_policy(
            policy,
            tokenizer,
            Path(cfg.out_dir) / "vllm-init",
            temperature=cfg.temperature,
            max_model_len=cfg.token_budget + cfg.max_new_tokens,
        )
    if cfg.backend != "hf":
        raise ValueError(f"unknown backend {cfg.backend!r}: use 'hf' or 'vllm'")
    gen_model = copy.deepcopy(policy).requires_grad_(False)
    if device.startswith("cuda"):
        # eager attention for the token-by-token loop: on an H200 (torch 2.11, cu130) SDPA took 2.5 s
        # for 40 new tokens of 8 rows in bfloat16 against 0.12 s eager (0.18 / 0.11 s in float32)
        gen_model.set_attn_implementation("eager")
    if device.startswith("cuda") and cfg.bf16:
        gen_model = gen_model.to(torch.bfloat16)
    elif device == "cpu" and cfg.exact_sampling:  # float64: samples independent of how requests were batched
        gen_model = gen_model.to(torch.float64)
    # every episode in flight may join one batch: on a GPU a decode step costs about the same at 16
    # rows as at 128 (launch-bound), so a cap below the concurrency splits a wave into batches run
    # one after the other; the prefix cache keeps a row for each episode in flight
    return HFBackend(gen_model, tokenizer, temperature=cfg.temperature, seed=cfg.seed, decode=cfg.decode,
                     max_batch=max(cfg.concurrency, 1), prefix_cache=max(128, cfg.concurrency))


def _progress(cfg: TrainConfig, start: int) -> Any:
    if not cfg.progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=cfg.steps, initial=start, desc="GRPO", unit="step")
