"""Per-step metrics to CSV and TensorBoard, and a PNG of the curves at the end."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np

PLOTTED = (
    "reward_mean",
    "success_rate",
    "eval_success",
    "eval_pass_at_k",
    "loss",
    "sft_loss",
    "group_reward_var",
    "gen_tokens_per_s",
    "staleness_mean",
)


class MetricsLog:
    def __init__(self, out_dir: Path, tensorboard: bool = True) -> None:
        self.path = out_dir / "metrics.csv"
        self.rows: list[dict[str, Any]] = []
        self.writer = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.writer = SummaryWriter(str(out_dir / "tb"))
            except ImportError:  # tensorboard is optional
                self.writer = None
        if self.path.exists():  # resuming: keep earlier rows
            with self.path.open() as f:
                self.rows = [{k: _num(v) for k, v in r.items()} for r in csv.DictReader(f)]

    def log(self, step: int, values: dict[str, Any]) -> None:
        same = [r for r in self.rows if r.get("step") == step]
        row = {**(same[0] if same else {}), "step": step, **values}  # eval and training rows of a step merge
        self.rows = [r for r in self.rows if r.get("step") != step] + [row]
        keys: list[str] = []
        for r in self.rows:
            keys += [k for k in r if k not in keys]
        with self.path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(self.rows)
        if self.writer is not None:
            for k, v in values.items():
                if isinstance(v, int | float) and np.isfinite(v):
                    self.writer.add_scalar(k, v, step)
            self.writer.flush()

    def plot(self, path: Path) -> Path | None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        names = [n for n in PLOTTED if any(isinstance(r.get(n), int | float) for r in self.rows)]
        if not names:
            return None
        fig, axes = plt.subplots(len(names), 1, figsize=(7, 2.2 * len(names)), sharex=True, squeeze=False)
        for ax, name in zip(axes[:, 0], names, strict=True):
            pts = [(r["step"], r[name]) for r in self.rows if isinstance(r.get(name), int | float)]
            xs, ys = zip(*pts, strict=True)
            ax.plot(xs, ys, marker="o" if len(xs) < 20 else None)
            ax.set_ylabel(name, fontsize=8)
            ax.grid(alpha=0.3)
        axes[-1, 0].set_xlabel("step")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _num(v: str) -> Any:
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v
