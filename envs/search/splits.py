"""Search-v0's train/test split by question, and its task ids.

A question's split is a hash of its normalised text: questions that read the same fall on the same
side, so train and test are disjoint by construction, whatever the order or size of the QA set,
on every machine. Task ids hash where the question comes from and the question itself, never its
answers (a hash of a short answer could be found by trying every candidate).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from agentrl.retrievers.datasets import Question, normalize_answer

SPLITS = ("train", "test")
TEST_PERCENT = 20


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "replace")).digest()


def split_of(question: str) -> str:
    """ "test" for about `TEST_PERCENT`% of question texts, "train" for the rest."""
    bucket = int.from_bytes(_digest("agentrl/Search-v0 split", normalize_answer(question))[:8], "big") % 100
    return "test" if bucket < TEST_PERCENT else "train"


def check_split(split: str) -> str:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    return split


def split_questions(questions: Sequence[Question], split: str) -> list[Question]:
    """The questions of one split, in their original order."""
    check_split(split)
    return [q for q in questions if split_of(q.question) == split]


def task_id(source: str, question: Question) -> str:
    """An opaque, stable name of one task: the QA source, the question's id and its text."""
    return _digest("agentrl/Search-v0 task", source, question.id, question.question).hex()[:20]
