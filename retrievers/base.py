"""The one retriever interface every backend implements, and the on-disk index layout.

An index directory holds `meta.json` (which backend built it and with what settings) next to the
backend's own files, so `open_index(DIR)` needs nothing but the path.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

META_FILE = "meta.json"

# backend name -> "module:Class"; modules are imported only when that backend is used
BACKENDS: dict[str, str] = {
    "bm25": "agentrl.retrievers.bm25:BM25Retriever",
    "lucene": "agentrl.retrievers.lucene:LuceneRetriever",
    "dense": "agentrl.retrievers.dense:DenseRetriever",
}


@dataclass(frozen=True)
class Hit:
    """One retrieved passage: Search-R1's `{"document": {"id", "contents"}, "score"}`."""

    id: str
    contents: str
    score: float

    @property
    def document(self) -> dict[str, str]:
        return {"id": self.id, "contents": self.contents}

    def as_json(self, return_scores: bool = True) -> dict[str, Any]:
        if return_scores:
            return {"document": self.document, "score": self.score}
        return self.document


class Retriever(ABC):
    """Batched top-k search over a fixed corpus.

    Batches are the unit because every backend is faster per query in batches, and the server
    turns concurrent requests into one batch.
    """

    backend: str = ""

    @abstractmethod
    def search(self, queries: list[str], k: int = 3) -> list[list[Hit]]:
        """One ranked list of at most `k` hits per query, in the order of `queries`."""

    def close(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing to release
        """Release native resources (JVM searchers, mmaps); the default holds none."""

    def __enter__(self) -> Retriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def split_title(contents: str) -> tuple[str, str]:
    """Search-R1's passage convention: the first line is the quoted title, the rest is text."""
    title, _, text = contents.partition("\n")
    return title.strip().strip('"'), text


def read_meta(index_dir: str | Path) -> dict[str, Any]:
    path = Path(index_dir) / META_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{index_dir} is not an agentrl index (no {META_FILE}); build one with "
            "`agentrl index build --corpus FILE.jsonl --backend bm25 --out DIR`"
        )
    return json.loads(path.read_text())


def write_meta(index_dir: str | Path, meta: dict[str, Any]) -> None:
    Path(index_dir).mkdir(parents=True, exist_ok=True)
    (Path(index_dir) / META_FILE).write_text(json.dumps(meta, indent=2))


def backend_class(name: str) -> type:
    if name not in BACKENDS:
        raise ValueError(f"unknown retrieval backend {name!r}; choose one of {sorted(BACKENDS)}")
    module_name, _, attr = BACKENDS[name].partition(":")
    return getattr(import_module(module_name), attr)


def open_index(index_dir: str | Path, **kwargs: Any) -> Retriever:
    """Open any index built by `build_index`, whatever its backend."""
    meta = read_meta(index_dir)
    return backend_class(meta["backend"]).open(Path(index_dir), **kwargs)


def build_index(corpus: str | Path, backend: str, out: str | Path, **kwargs: Any) -> Path:
    """Index a Search-R1 JSONL corpus (`{"id", "contents"}` per line) into `out`."""
    cls = backend_class(backend)
    cls.build(Path(corpus), Path(out), **kwargs)
    return Path(out)
