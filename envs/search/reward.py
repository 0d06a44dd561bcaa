"""Search-R1's answer scoring: its normalisation, exact match, token F1 and format score."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from agentrl.retrievers.datasets import normalize_answer

__all__ = ["answer_reward", "exact_match", "f1_score", "normalize_answer"]


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    normalized = normalize_answer(prediction)
    return float(any(normalize_answer(gold) == normalized for gold in golds))


def f1_score(prediction: str, golds: Sequence[str]) -> float:
    """Best token-level F1 against any gold answer."""
    predicted = normalize_answer(prediction).split()
    best = 0.0
    for gold in golds:
        expected = normalize_answer(gold).split()
        common = sum((Counter(predicted) & Counter(expected)).values())
        if common:
            precision, recall = common / len(predicted), common / len(expected)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def answer_reward(
    prediction: str | None, golds: Sequence[str], metric: str = "em", format_score: float = 0.0
) -> float:
    """Search-R1's `compute_score_em`: full score when right, `format_score` for a well-formed
    but wrong answer, 0 when no answer was given. `metric="f1"` grades with token F1 instead."""
    if prediction is None:
        return 0.0
    score = exact_match(prediction, golds) if metric == "em" else f1_score(prediction, golds)
    return score if score > 0 else format_score
