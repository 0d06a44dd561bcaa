"""Dense retrieval quality on the shipped QA (FanOutQA sub-questions over Wikipedia leads)."""

from __future__ import annotations

import random

from agentrl.retrievers import build_index, open_index, split_title
from agentrl.retrievers.corpus import write_corpus


def test_dense_recall_at_10_on_shipped_qa(wiki_rows, wiki_questions, tmp_path, record_property):
    # the evidence passages plus random distractors keep the encode small; bench/retrieval.py
    # reports the figure on the full 10k corpus
    evidence = {q.evidence[0] for q in wiki_questions}
    gold = [r for r in wiki_rows if split_title(r["contents"])[0] in evidence]
    others = [r for r in wiki_rows if split_title(r["contents"])[0] not in evidence]
    rows = gold + random.Random(0).sample(others, 400)
    # the first 64 tokens of a lead name its subject; 4x cheaper to encode than the full 256
    build_index(write_corpus(rows, tmp_path / "c.jsonl"), "dense", tmp_path / "idx", max_tokens=64)
    with open_index(tmp_path / "idx") as retriever:
        hits = retriever.search([q.question for q in wiki_questions], 10)
    found = [
        any(split_title(h.contents)[0] == q.evidence[0] for h in per)
        for per, q in zip(hits, wiki_questions, strict=True)
    ]
    recall = sum(found) / len(found)
    record_property("dense_recall_at_10", recall)
    print(f"\ndense recall@10 on {len(found)} FanOutQA questions over {len(rows)} passages: {recall:.3f}")
    assert recall >= 0.6
