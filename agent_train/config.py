"""Every knob of a run, in one dataclass that the CLI and YAML files fill."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal


@dataclass
class TrainConfig:
    env: str = "agentrl/Flights-v0"
    env_url: str | None = None  # an agentrl server; None runs the env in-process
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    model: str = "smollm2"  # a directory, a .gguf file, "smollm2", or "tiny:LAYERSxHIDDEN" (random init)
    backend: str = "hf"  # "hf" (transformers generate) or "vllm"
    device: str = "auto"  # "auto" picks cuda when present
    bf16: bool = True  # on GPU only; CPU trains in float32
    seed: int = 0
    steps: int = 50
    groups_per_step: int = 8  # distinct seeds (tasks) per step
    group_size: int = 8  # G rollouts per task
    concurrency: int = 64  # episodes in flight at once
    max_new_tokens: int = 128
    token_budget: int = 2048
    temperature: float = 1.0
    exact_sampling: bool = True  # CPU: generate in float64 so samples do not depend on batching (slower)
    decode: str = "static"  # "static" (a cache of fixed width), "compiled" (its step compiled), "dynamic"
    system_prompt: str | None = None
    success_threshold: float = 1.0
    # GRPO
    lr: float = 1e-6
    weight_decay: float = 0.0
    advantage: Literal["std", "mean"] = "std"  # GRPO, or Dr. GRPO
    zero_variance: Literal["skip", "keep"] = "skip"  # or keep, with zero advantage
    clip_low: float = 0.2
    clip_high: float = 0.28
    aggregation: str = "token-mean"  # "seq-mean", "token-mean" or "constant"
    kl_coef: float = 0.0  # > 0 keeps a frozen reference and adds the k3 KL
    epochs_per_step: int = 1  # optimizer passes over one step's rollouts
    micro_batch: int = 16  # sequences per backward pass at most (gradient accumulation)
    pass_tokens: int = 4096  # padded tokens per forward/backward pass (one sequence at least): bounds memory
    checkpoint_activations: bool = True  # keep layer inputs only, recompute the rest in backward (as TRL)
    max_grad_norm: float = 1.0
    recompute_logprobs: bool = True
    # asynchrony
    max_staleness: int = 1  # drop samples whose oldest token is older than this many versions
    is_cap: float = 2.0  # truncated importance weight cap for tokens from an older policy
    # runs
    out_dir: str = "runs/agent-train"
    resume: str | None = None  # a checkpoint folder to continue from
    save_every: int = 0  # 0: save at the end only
    eval_every: int = 0  # 0: eval before and after only
    eval_seeds: int = 32
    eval_k: int = 4
    eval_seed_offset: int = 1_000_000  # eval seeds; never training seeds, whatever the splits
    train_split: str = "train"  # passed as split= to envs that take one ("" passes none)
    eval_split: str = "test"  # the held-out side; its task ids must never show up in training
    shuffle_rewards: bool = False  # negative control: permute each step's rewards across its episodes
    # credit assignment (credit.py): "episode" (GRPO), "anchor" (GiGPO state groups), "branch" (forks)
    credit: str = "episode"
    credit_omega: float = 1.0  # weight of the step level: A = A_E + omega * A_step
    credit_gamma: float = 0.95  # anchor: discount of the step returns
    credit_branches: int = 2  # branch: forks at each branch point
    credit_branch_points: int = 2  # branch: fork before turns 1..N of each rollout (0: every turn)
    gen_token_budget: int = 0  # stop once this many tokens were generated (forks included); 0: steps only
    max_wall_s: float = 0.0  # stop after the step that ends past this many seconds of steps; 0: steps only
    # failures
    max_idle_steps: int = 5  # stop after this many steps in a row with no trainable sample (0: never)
    max_excluded_frac: float = 0.5  # stop when more of a step's (or an eval's) episodes are excluded
    tensorboard: bool = True
    plot: bool = True
    progress: bool = True

    def __post_init__(self) -> None:
        allowed = {
            "backend": ("hf", "vllm"),
            "decode": ("static", "compiled", "dynamic"),
            "advantage": ("std", "mean"),
            "zero_variance": ("skip", "keep"),
            "aggregation": ("seq-mean", "token-mean", "constant"),
            "credit": ("episode", "anchor", "branch"),
        }
        for name, options in allowed.items():
            if getattr(self, name) not in options:
                raise ValueError(f"{name} must be one of {options}, not {getattr(self, name)!r}")
        if not 0.0 <= self.max_excluded_frac <= 1.0:
            raise ValueError("max_excluded_frac must be between 0 and 1")
        if self.credit_branches < 1 or self.credit_branch_points < 0:
            raise ValueError("credit_branches must be at least 1 and credit_branch_points at least 0")
        if self.group_size < 2:
            raise ValueError("group_size must be at least 2: GRPO's baseline is the group mean")

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> TrainConfig:
        import yaml

        data = yaml.safe_load(Path(path).read_text()) or {}
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown config keys in {path}: {sorted(unknown)}")
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
