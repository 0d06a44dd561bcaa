"""The training loop, top to bottom: rollouts (one step ahead, in a background event loop),
group advantages, logprob recomputation, clipped masked loss, optimizer step, weight push.

A run is reproducible from its config: the seed fixes the init, the env seeds and every sampled
token (per-request seeds), and weights are pushed between rollout steps, never during one, so
step s's rollouts always see policy version s - max_staleness.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import queue
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentrl.agent_train.accounting import FailureGuard, TaskLedger, TrainingAborted, split_kwargs
from agentrl.agent_train.backends import GenerationBackend, HFBackend, derive_seed
from agentrl.agent_train.checkpoints import load_resume_state, save_checkpoint
from agentrl.agent_train.config import TrainConfig
from agentrl.agent_train.credit import Advantage, advantage_tensor, assign_credit, groups_collector
from agentrl.agent_train.evaluate import evaluate
from agentrl.agent_train.grpo import grpo_loss, token_logprobs
from agentrl.agent_train.rollout import Episode, RolloutLimits, Rollouts, driver_factory


# ---------------------------------------------------------------------------------------------
# rollouts in the background
# ---------------------------------------------------------------------------------------------
def train_seeds(cfg: TrainConfig, step: int) -> list[int]:
    """The env seeds (one per group) of a training step."""
    base = cfg.seed * 1_000_003 + step * cfg.groups_per_step
    return [base + i for i in range(cfg.groups_per_step)]


def eval_seeds(cfg: TrainConfig) -> list[int]:
    """The env seeds of every evaluation (of the eval split, where the env has splits)."""
    return [cfg.eval_seed_offset + i for i in range(cfg.eval_seeds)]


class RolloutProducer:
    """Collects step s's groups on its own event loop thread once the policy version reaches
    s - max_staleness, so rollouts for the next step run while the current one trains.

    Training episodes come from the train split, evaluation episodes from the held-out split
    (`train_spec` and `eval_spec` differ only in their env kwargs)."""

    TRAIN, EVAL = 1, 2  # sampling-seed streams; every eval reuses one (common random numbers)

    def __init__(self, cfg: TrainConfig, train_spec: Rollouts, eval_spec: Rollouts):
        self.cfg, self.train_spec, self.eval_spec = cfg, train_spec, eval_spec
        self.backend = train_spec.backend
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="rollouts")
        self.out: queue.Queue = queue.Queue()
        self.version = 0
        self.collected = -1  # the last step whose rollouts are done
        self._cond = threading.Condition()
        self._job: Any = None
        self._task: asyncio.Task | None = None
        self.closed = False
        self.thread.start()

    def start(self, first_step: int, steps: int) -> None:
        self.collected = first_step - 1
        self._job = asyncio.run_coroutine_threadsafe(self._produce(first_step, steps), self.loop)

    async def _cancel(self, task: asyncio.Task | None) -> None:
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _produce(self, first_step: int, steps: int) -> None:
        self._task = asyncio.current_task()
        for step in range(first_step, steps):
            await asyncio.to_thread(self._wait_for_version, step - self.cfg.max_staleness)
            start = time.perf_counter()
            tokens_before, busy_before = self.backend.generated_tokens, self.backend.busy_s
            groups = await groups_collector(self.cfg)(
                self.train_spec,
                train_seeds(self.cfg, step),
                self.cfg.group_size,
                sample_seed=derive_seed(self.cfg.seed, self.TRAIN, step),
            )
            timing = {
                "rollout_s": time.perf_counter() - start,
                "gen_tokens": self.backend.generated_tokens - tokens_before,
                "gen_busy_s": self.backend.busy_s - busy_before,
            }
            self.out.put((step, groups, timing))
            with self._cond:
                self.collected = step
                self._cond.notify_all()

    def _wait_for_version(self, version: int) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self.version >= version or self.closed)

    def wait_collected(self, step: int) -> None:
        """Block until step's rollouts are done (they must not see the weights pushed next)."""
        with self._cond:
            while not self._cond.wait_for(lambda: self.collected >= step, timeout=0.5):
                if self._job is not None and self._job.done():
                    self._job.result()  # re-raises a rollout failure here
                    raise RuntimeError("rollout producer stopped early")

    def set_version(self, version: int) -> None:
        with self._cond:
            self.version = version
            self._cond.notify_all()

    def get(self) -> tuple[int, list[list[Episode]], dict[str, float]]:
        while True:
            try:
                return self.out.get(timeout=0.5)
            except queue.Empty:
                if self._job is not None and self._job.done():
                    self._job.result()  # re-raises a rollout failure here
                    raise RuntimeError("rollout producer stopped early") from None

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def evaluate(self, seeds: list[int], k: int) -> tuple[dict[str, float], list[Episode]]:
        sample_seed = derive_seed(self.cfg.seed, self.EVAL)
        return self.run(evaluate(self.eval_spec, seeds, k, sample_seed, progress=self.cfg.progress))

    def close(self) -> None:
        with self._cond:  # a producer waiting for a policy version that will never come returns
            self.closed = True
            self._cond.notify_all()
        if self._job is not None and not self._job.done():
            self.run(self._cancel(self._task))  # the task ends before its loop stops
        if hasattr(self.backend, "aclose"):
            with contextlib.suppress(Exception):
                self.run(self.backend.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


# ---------------------------------------------------------------------------------------------
# batch building and one optimizer step
# ---------------------------------------------------------------------------------------------
def build_batch(episodes: list[Episode], advantages: list[Advantage], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded tensors; the mask is the transcripts' provenance mask, padded with 0."""
    width = max(len(e.transcript.ids) for e in episodes)
    n = len(episodes)
    batch = {
        "ids": torch.full((n, width), pad_id, dtype=torch.long),
        "attention": torch.zeros((n, width), dtype=torch.long),
        "mask": torch.zeros((n, width)),
        "behav_logp": torch.zeros((n, width)),
        "versions": torch.full((n, width), -1, dtype=torch.long),
        "adv": advantage_tensor(episodes, advantages, width),  # per sequence, or per token
    }
    for i, e in enumerate(episodes):
        t, m = e.transcript, len(e.transcript.ids)
        batch["ids"][i, :m] = torch.tensor(t.ids)
        batch["attention"][i, :m] = 1
        batch["mask"][i, :m] = torch.tensor(t.mask, dtype=torch.float32)
        batch["behav_logp"][i, :m] = torch.tensor(t.logprobs)
        batch["versions"][i, :m] = torch.tensor(t.versions)
    return batch


def select_samples(
    groups: list[list[Episode]], adv: Any, keep: Any, version: int, max_staleness: int
) -> tuple[list[Episode], list[Advantage], int]:
    """What gets trained on: not excluded (drift, errors), not too stale, not in a skipped group."""
    chosen, chosen_adv, stale = [], [], 0
    for gi, group in enumerate(groups):
        for ei, e in enumerate(group):
            sampled = [v for v, m in zip(e.transcript.versions, e.transcript.mask, strict=True) if m]
            if version - min(sampled, default=version) > max_staleness:
                stale += 1
            elif keep[gi][ei] and e.excluded is None and sampled:
                chosen.append(e)
                a = adv[gi][ei]
                chosen_adv.append(a if isinstance(a, list) else float(a))
    return chosen, chosen_adv, stale


def sequence_logprobs(
    model: Any,
    ids: torch.Tensor,
    attention: torch.Tensor,
    temperature: float,
    autocast: bool,
    suppress_ids: list[int] | None = None,
) -> torch.Tensor:
    device = next(model.parameters()).device
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=autocast):
        logits = model(input_ids=ids.to(device), attention_mask=attention.to(device)).logits
    return token_logprobs(logits, ids.to(device), temperature, suppress_ids)


def optimize(
    policy: Any,
    ref: Any | None,
    optimizer: torch.optim.Optimizer,
    batch: dict[str, torch.Tensor],
    cfg: TrainConfig,
    autocast: bool,
    suppress: list[int],
) -> dict[str, float]:
    n = batch["ids"].shape[0]
    device = next(policy.parameters()).device
    micro = [slice(i, min(i + cfg.micro_batch, n)) for i in range(0, n, cfg.micro_batch)]
    b = {k: v.to(device) for k, v in batch.items()}
    # Tokens from older policies than the current one get a truncated importance weight.
    with torch.no_grad():
        if cfg.recompute_logprobs:
            old = torch.cat(
                [
                    sequence_logprobs(
                        policy, b["ids"][s], b["attention"][s], cfg.temperature, autocast, suppress
                    )
                    for s in micro
                ]
            )
        else:
            old = b["behav_logp"]
        weights = torch.clamp(torch.exp(old - b["behav_logp"]), max=cfg.is_cap) * b["mask"]
        ref_logp = None
        if ref is not None:
            ref_logp = torch.cat(
                [
                    sequence_logprobs(
                        ref, b["ids"][s], b["attention"][s], cfg.temperature, autocast, suppress
                    )
                    for s in micro
                ]
            )
    total_tokens = float(b["mask"].sum().clamp_min(1))
    seqs_with_tokens = float((b["mask"].sum(1) > 0).sum().clamp_min(1))
    stats: dict[str, float] = {}
    policy.train()
    for _ in range(cfg.epochs_per_step):
        optimizer.zero_grad(set_to_none=True)
        loss_sum, parts = 0.0, []
        for s in micro:
            logp = sequence_logprobs(
                policy, b["ids"][s], b["attention"][s], cfg.temperature, autocast, suppress
            )
            kwargs: dict[str, Any] = {}
            if cfg.aggregation == "token-mean":  # mean over the whole step's tokens, not the micro-batch's
                kwargs = {"aggregation": "constant", "normaliser": total_tokens}
            elif cfg.aggregation == "constant":
                kwargs = {"aggregation": "constant", "normaliser": float(n * cfg.max_new_tokens)}
            else:
                kwargs = {"aggregation": "seq-mean"}
            loss, part = grpo_loss(
                logp,
                old[s],
                b["adv"][s],
                b["mask"][s],
                clip_low=cfg.clip_low,
                clip_high=cfg.clip_high,
                ref_logp=None if ref_logp is None else ref_logp[s],
                kl_coef=cfg.kl_coef,
                is_weights=weights[s],
                **kwargs,
            )
            if cfg.aggregation == "seq-mean":
                loss = loss * float((b["mask"][s].sum(1) > 0).sum()) / seqs_with_tokens
            loss.backward()
            loss_sum += float(loss.detach())
            parts.append(part)
        grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
        optimizer.step()
        stats = {
            "loss": loss_sum,
            "grad_norm": float(grad_norm),
            **{k: float(np.mean([p[k] for p in parts])) for k in parts[0]},
        }
    stats["is_weight_mean"] = float(weights.sum() / b["mask"].sum().clamp_min(1))
    mismatch = torch.where(b["mask"] > 0, (old - b["behav_logp"]).abs(), 0.0)
    stats["logprob_mismatch"] = float(mismatch.sum() / total_tokens)
    return stats


# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------
def episode_metrics(groups: list[list[Episode]]) -> dict[str, float]:
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
    from agentrl.agent_train.metrics import MetricsLog
    from agentrl.agent_train.models import load_model, pick_device

    torch.manual_seed(cfg.seed)
    device = pick_device(cfg.device)
    autocast = cfg.bf16 and device.startswith("cuda")
    if policy is None:
        policy, tokenizer = load_model(cfg.resume or cfg.model, cfg.env, device, cfg.seed, **cfg.env_kwargs)
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
    train_spec, eval_spec = rollout_specs(cfg, backend, tokenizer, log)
    producer = RolloutProducer(cfg, train_spec, eval_spec)
    producer.set_version(start_step)
    metrics = MetricsLog(out, tensorboard=cfg.tensorboard)
    guard = FailureGuard(cfg.max_idle_steps, cfg.max_excluded_frac, log)
    ledger = TaskLedger()
    held_out = eval_seeds(cfg)
    result: dict[str, Any] = {"out_dir": str(out)}

    def run_eval(step: int, name: str) -> dict[str, float]:
        scores, episodes = producer.evaluate(held_out, cfg.eval_k)
        scores.update(
            {f"eval_{k}": v for k, v in guard.check_episodes(f"eval at step {step}", episodes).items()}
        )
        ledger.add_eval(episodes)
        log(f"{name} (step {step}, split {cfg.eval_split or 'none'}): {scores}")
        return scores

    try:
        if cfg.eval_seeds:
            result["eval_before"] = run_eval(start_step, "eval before")
            metrics.log(start_step, result["eval_before"])
        producer.start(start_step, cfg.steps)
        bar = _progress(cfg, start_step)
        generated = 0
        for step in range(start_step, cfg.steps):
            t0 = time.perf_counter()
            _, groups, timing = producer.get()
            flat = [e for g in groups for e in g]
            row = episode_metrics(groups)
            row.update(guard.check_episodes(f"step {step}", flat))
            ledger.add_train(flat)
            credit = assign_credit(cfg, groups, step)  # episode (GRPO), anchor or branch: see credit.py
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
            lags = [
                step - v
                for e in flat
                for v, m in zip(e.transcript.versions, e.transcript.mask, strict=True)
                if m
            ]
            row.update(
                staleness_mean=float(np.mean(lags)) if lags else 0.0,
                dropped_stale=float(stale),
                trained_samples=float(len(chosen)),
                rollout_s=timing["rollout_s"],
                gen_tokens_per_s=timing["gen_tokens"] / max(timing["gen_busy_s"], 1e-9),
                gen_tokens=float(timing["gen_tokens"]),  # every token generated, forks included
            )
            generated += timing["gen_tokens"]
            t_train = time.perf_counter()
            if chosen:
                batch = build_batch(chosen, chosen_adv, tokenizer.pad_token_id)
                row.update(optimize(policy, ref, optimizer, batch, cfg, autocast, backend.suppress_ids))
            producer.wait_collected(min(step + cfg.max_staleness, cfg.steps - 1))
            backend.update_weights({k: v.detach() for k, v in policy.state_dict().items()}, step + 1)
            producer.set_version(step + 1)
            row.update(train_s=time.perf_counter() - t_train, step_s=time.perf_counter() - t0)
            if cfg.eval_every and (step + 1) % cfg.eval_every == 0 and step + 1 < cfg.steps:
                row.update(run_eval(step + 1, "eval"))
            metrics.log(step + 1, row)
            if cfg.save_every and (step + 1) % cfg.save_every == 0:
                save_checkpoint(out / f"checkpoint-{step + 1}", policy, tokenizer, optimizer, step + 1, cfg)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(reward=f"{row['reward_mean']:.3f}", succ=f"{row['success_rate']:.2f}")
            if cfg.gen_token_budget and generated >= cfg.gen_token_budget:
                break  # equal generated tokens across credit modes, however many steps that takes
        if bar is not None:
            bar.close()
        if cfg.eval_seeds:
            result["eval_after"] = run_eval(cfg.steps, "eval after")
            metrics.log(cfg.steps, result["eval_after"])
        result["tasks"] = ledger.summary()
        log(
            f"tasks: train {result['tasks']['train_tasks']} (split {cfg.train_split or 'none'}), "
            f"eval {result['tasks']['eval_tasks']} (split {cfg.eval_split or 'none'}), "
            f"overlap {result['tasks']['overlap']}"
            + ("" if ledger.train or ledger.eval else " (the env names no tasks: info has no task_id)")
        )
        result["checkpoint"] = str(
            save_checkpoint(out / f"checkpoint-{cfg.steps}", policy, tokenizer, optimizer, cfg.steps, cfg)
        )
        if cfg.plot:
            result["plot"] = str(metrics.plot(out / "curves.png"))
    except TrainingAborted as exc:
        log(f"agent-train stopped: {exc}")
        raise
    finally:
        producer.close()
        metrics.close()
    result["metrics"] = metrics.rows
    return result


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
    if device.startswith("cuda") and cfg.bf16:
        gen_model = gen_model.to(torch.bfloat16)
    elif device == "cpu" and cfg.exact_sampling:  # float64: samples independent of how requests were batched
        gen_model = gen_model.to(torch.float64)
    return HFBackend(gen_model, tokenizer, temperature=cfg.temperature, seed=cfg.seed)


def _progress(cfg: TrainConfig, start: int) -> Any:
    if not cfg.progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=cfg.steps, initial=start, desc="GRPO", unit="step")
