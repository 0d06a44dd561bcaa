"""Where Search-v0's questions and passages come from, and the retriever over them.

Built-in datasets are indexed once per machine into a cache directory keyed by the corpus
content (an atomic rename makes concurrent builders safe) and opened once per process, so a
vector of envs shares one retriever.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from functools import lru_cache
from pathlib import Path

from agentrl.retrievers import Hit, Retriever, open_index
from agentrl.retrievers.base import build_index
from agentrl.retrievers.client import HttpRetriever
from agentrl.retrievers.corpus import fingerprint, write_corpus
from agentrl.retrievers.datasets import Question, load_qa, wiki_corpus
from agentrl.retrievers.synthetic import generate_world
from agentrl.retrievers.wiki_questions import wiki_questions
from agentrl.search.splits import split_questions

_open: dict[tuple[object, ...], Retriever] = {}
_keep: list[object] = []
_lock = threading.Lock()


def cache_dir() -> Path:
    return Path(os.environ.get("AGENTRL_CACHE", Path.home() / ".cache" / "agentrl"))


def cached_index(rows: list[dict[str, str]], backend: str) -> Path:
    """The index of `rows` for `backend`, built on first use."""
    root = cache_dir() / "indexes"
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        corpus = write_corpus(rows, Path(tmp) / "corpus.jsonl")
        target = root / f"{backend}-{fingerprint(corpus)}"
        if not (target / "meta.json").is_file():
            build_index(corpus, backend, Path(tmp) / "index")
            try:
                os.rename(Path(tmp) / "index", target)
            except OSError:  # another process finished first
                shutil.rmtree(Path(tmp) / "index", ignore_errors=True)
    return target


@lru_cache(maxsize=8)
def load_source(
    dataset: str, *, world_seed: int = 0, world_passages: int = 10_000, qa_path: str | None = None
) -> tuple[list[Question], list[dict[str, str]] | None]:
    """Questions, and the corpus when the dataset brings its own (None: the user's index)."""
    if qa_path is not None:
        return load_qa(qa_path), None
    if dataset == "synthetic":
        world = generate_world(seed=world_seed, passages=world_passages)
        return world.questions, world.passages
    if dataset == "wiki":
        rows = wiki_corpus()
        return wiki_questions(rows), rows
    raise ValueError(f"unknown dataset {dataset!r}: use 'synthetic', 'wiki', or qa_path= with your own index")


@lru_cache(maxsize=16)
def load_split(
    dataset: str, split: str, *, world_seed: int = 0, world_passages: int = 10_000, qa_path: str | None = None
) -> list[Question]:
    """One split's questions, computed once per process like the source itself."""
    questions, _ = load_source(dataset, world_seed=world_seed, world_passages=world_passages, qa_path=qa_path)
    return split_questions(questions, split)


class SharedRetriever(Retriever):
    """One retriever used by many envs, possibly from several threads: searches take turns
    (a JVM searcher or an ONNX session must not be entered twice at once)."""

    def __init__(self, inner: Retriever) -> None:
        self.inner = inner
        self.backend = inner.backend
        self._lock = threading.Lock()

    def search(self, queries: list[str], k: int = 3) -> list[list[Hit]]:
        with self._lock:
            return self.inner.search(queries, k)


def get_retriever(
    rows: list[dict[str, str]] | None,
    *,
    backend: str = "bm25",
    index_dir: str | None = None,
    retrieval_url: str | None = None,
) -> Retriever:
    """A retrieval-server client, or the process-wide retriever over `index_dir` or `rows`."""
    if retrieval_url is not None:
        return HttpRetriever(retrieval_url)
    with _lock:
        if index_dir is not None:
            key: tuple[object, ...] = ("dir", str(Path(index_dir).resolve()))
        elif rows is not None:
            key = ("rows", id(rows), backend)  # rows come from load_source's cache: same object, same corpus
        else:
            raise ValueError("own QA files need index_dir= (a built index) or retrieval_url= (a server)")
        if key not in _open:
            if index_dir is not None:
                path = Path(index_dir)
            else:
                assert rows is not None, "the branch above: rows or index_dir"
                path = cached_index(rows, backend)
            _open[key] = SharedRetriever(open_index(path))
            _keep.append(rows)  # id(rows) stays unique while the rows are alive
        return _open[key]
