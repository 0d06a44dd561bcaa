"""Retrievers behind one interface: Lucene BM25 (pyserini), bm25s and faiss dense.

Knows nothing of the envs: a corpus in, ranked passages out, in process or over Search-R1's
HTTP API. Backends import their heavy dependencies only when opened.
"""

from agentrl.retrievers.base import Hit, Retriever, build_index, open_index, split_title

__all__ = ["Hit", "Retriever", "build_index", "open_index", "split_title"]
