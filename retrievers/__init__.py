"""Retrievers behind one interface: Lucene BM25, bm25s and faiss dense."""
