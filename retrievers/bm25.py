"""BM25 in pure Python with `bm25s`, tuned to rank like Anserini's Lucene BM25.

Same parameters as pyserini's defaults (k1=0.9, b=0.4, Lucene's IDF), the same 33 English stop
words as Lucene's `EnglishAnalyzer`, the original Porter stemmer and single-character tokens kept,
so the light backend and the Java one agree on the top passage for nearly every query.
"""

from __future__ import annotations

import re
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

import numpy as np

from agentrl.retrievers.base import Hit, Retriever, read_meta, write_meta
from agentrl.retrievers.corpus import DocStore, fingerprint

# org.apache.lucene.analysis.en.EnglishAnalyzer.ENGLISH_STOP_WORDS_SET
LUCENE_STOPWORDS = [
    "a",
    "an",
    "and",
    "are",
    "as",
    "at",
    "be",
    "but",
    "by",
    "for",
    "if",
    "in",
    "into",
    "is",
    "it",
    "no",
    "not",
    "of",
    "on",
    "or",
    "such",
    "that",
    "the",
    "their",
    "then",
    "there",
    "these",
    "they",
    "this",
    "to",
    "was",
    "will",
    "with",
]
TOKEN_PATTERN = r"(?u)\b\w+\b"
_POSSESSIVE = re.compile("['\u2019]s\\b")  # Lucene's EnglishPossessiveFilter
K1, B = 0.9, 0.4


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import Stemmer

    return Stemmer.Stemmer("porter").stemWords


def tokenize(texts: list[str], *, show_progress: bool = False) -> list[list[str]]:
    import bm25s

    cleaned = [_POSSESSIVE.sub("", t) for t in texts]
    return cast(list[list[str]], bm25s.tokenize(  # return_ids=False: the tokens (bm25s types the union)
        cleaned,
        token_pattern=TOKEN_PATTERN,
        stopwords=LUCENE_STOPWORDS,
        stemmer=_stemmer(),
        return_ids=False,
        show_progress=show_progress,
    ))


class BM25Retriever(Retriever):
    backend = "bm25"

    def __init__(self, model: Any, docs: DocStore) -> None:
        self.model = model
        self.docs = docs

    @classmethod
    def build(cls, corpus: Path, out: Path, **_: Any) -> None:
        import bm25s

        started = time.perf_counter()
        count = DocStore.create(corpus, out)
        docs = DocStore(out)
        tokens = tokenize([row["contents"] for row in docs], show_progress=True)
        model = bm25s.BM25(k1=K1, b=B, method="lucene")
        model.index(tokens, show_progress=True)
        model.save(out / "bm25s")
        docs.close()
        write_meta(
            out,
            {
                "backend": cls.backend,
                "passages": count,
                "k1": K1,
                "b": B,
                "corpus_sha": fingerprint(out / "corpus.jsonl"),
                "build_seconds": round(time.perf_counter() - started, 3),
            },
        )

    @classmethod
    def open(cls, index_dir: Path, **_: Any) -> BM25Retriever:
        import bm25s

        read_meta(index_dir)
        model = bm25s.BM25.load(index_dir / "bm25s", mmap=False, show_progress=False)
        return cls(model, DocStore(index_dir))

    @classmethod
    def from_rows(cls, rows: list[dict[str, str]], workdir: Path) -> BM25Retriever:
        """Index rows already in memory (a generated world) through the same on-disk path."""
        from agentrl.retrievers.corpus import write_corpus

        corpus = write_corpus(rows, workdir / "source.jsonl")
        cls.build(corpus, workdir / "index")
        return cls.open(workdir / "index")

    def search(self, queries: list[str], k: int = 3) -> list[list[Hit]]:
        if not queries:
            return []
        k = max(1, min(k, len(self.docs)))
        tokens = tokenize(queries)
        # bm25s rejects a query with no known token; such a query matches nothing, as in Lucene
        vocab = self.model.vocab_dict
        known = [[t for t in q if t in vocab] for q in tokens]
        results: list[list[Hit]] = [[] for _ in queries]
        todo = [i for i, q in enumerate(known) if q]
        if todo:
            rows, scores = self.model.retrieve(
                [known[i] for i in todo], k=k, show_progress=False, n_threads=1
            )
            for i, row_ids, row_scores in zip(todo, np.asarray(rows), np.asarray(scores), strict=True):
                for row, score in zip(row_ids, row_scores, strict=True):
                    if score > 0:
                        doc = self.docs[int(row)]
                        results[i].append(Hit(doc["id"], doc["contents"], float(score)))
        return results

    def close(self) -> None:
        self.docs.close()
