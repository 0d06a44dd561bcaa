"""The retriever backends, corpora and QA loaders, on real indexes built from small corpora."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agentrl.retrievers import build_index, open_index, split_title
from agentrl.retrievers.corpus import DocStore, iter_corpus, write_corpus
from agentrl.retrievers.datasets import WIKI_ATTRIBUTION, load_qa
from agentrl.retrievers.synthetic import generate_world


def test_synthetic_world_is_seeded_and_consistent():
    a, b, c = generate_world(3, 400), generate_world(3, 400), generate_world(4, 400)
    assert a == b and a.passages != c.passages
    assert len(a.passages) == 400 and len({p["id"] for p in a.passages}) == 400
    titles = {split_title(p["contents"])[0]: p["contents"] for p in a.passages}
    assert len(titles) == 400  # entity names are unique
    hops = {q.hops for q in a.questions}
    assert hops == {1, 2}
    for q in a.questions:
        assert all(t in titles for t in q.evidence)
        assert q.answers[0] in titles[q.evidence[-1]]  # the last evidence passage states the answer


def test_wiki_corpus_and_shipped_questions(wiki_rows, wiki_questions):
    assert len(wiki_rows) > 9_900
    title, text = split_title(wiki_rows[0]["contents"])
    assert wiki_rows[0]["contents"].startswith(f'"{title}"\n') and len(text) > 40
    assert len(wiki_questions) >= 400 and all(q.answers and q.evidence for q in wiki_questions)
    assert "CC BY-SA" in WIKI_ATTRIBUTION


def test_bm25_search_shapes_and_edges(world_bm25_dir, world):
    with open_index(world_bm25_dir) as retriever:
        assert retriever.backend == "bm25"
        hits = retriever.search([world.questions[0].question, "zzzqqq", ""], k=5)
        assert len(hits) == 3 and len(hits[0]) == 5 and hits[1] == [] and hits[2] == []
        assert [h.score for h in hits[0]] == sorted((h.score for h in hits[0]), reverse=True)
        assert len(retriever.search(["city"], k=10_000)[0]) <= len(world.passages)
        assert retriever.search([], 3) == []
        hits = retriever.search([q.evidence[0] for q in world.questions[:50]], k=1)
        found = sum(
            split_title(h[0].contents)[0] == q.evidence[0]
            for h, q in zip(hits, world.questions, strict=False)
        )
        assert found >= 48  # a passage's title finds the passage


def test_bad_corpus_line_is_reported_with_its_number(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": 1, "contents": "ok"}\n{"id": 2}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        list(iter_corpus(path))
    with pytest.raises(FileNotFoundError, match="not an agentrl index"):
        open_index(tmp_path)
    with pytest.raises(ValueError, match="unknown retrieval backend"):
        build_index(path, "nope", tmp_path / "x")


def test_docstore_round_trip(tmp_path):
    rows = [{"id": str(i), "contents": f'"T{i}"\nünïcode {i}'} for i in range(5)]
    write_corpus(rows, tmp_path / "c.jsonl")
    DocStore.create(tmp_path / "c.jsonl", tmp_path / "idx")
    store = DocStore(tmp_path / "idx")
    assert list(store) == rows and store[3] == rows[3] and len(store) == 5
    with pytest.raises(IndexError):
        store[5]
    store.close()


@pytest.fixture(scope="module")
def world_dense(world_file, tmp_path_factory):
    out = build_index(world_file, "dense", tmp_path_factory.mktemp("dense") / "flat", index_type="flat")
    with open_index(out) as retriever:
        yield retriever


def test_dense_search_finds_entities(world_dense, world):
    questions = world.questions[:60]
    hits = world_dense.search([q.question for q in questions], k=10)
    recall = np.mean(
        [
            any(split_title(h.contents)[0] == q.evidence[0] for h in per)
            for per, q in zip(hits, questions, strict=True)
        ]
    )
    assert recall >= 0.6, recall
    norms = world_dense.index.reconstruct_n(0, 5)
    assert np.allclose(np.linalg.norm(norms, axis=1), 1.0, atol=1e-3)


def test_dense_hnsw_matches_flat_top1(world_dense, world, world_file, tmp_path):
    import shutil

    # the embedding chunks are the cache: an HNSW rebuild next to them encodes nothing again
    flat_dir = tmp_path / "hnsw"
    shutil.copytree(world_dense.docs.path.parent, flat_dir)
    (flat_dir / "meta.json").unlink()
    from agentrl.retrievers import dense

    calls = []
    original = dense.Encoder.encode
    dense.Encoder.encode = lambda self, texts, batch_size=16, progress=None: (
        calls.append(len(texts)) or original(self, texts, batch_size, progress)
    )
    try:
        build_index(world_file, "dense", flat_dir, index_type="hnsw")
    finally:
        dense.Encoder.encode = original
    assert calls == []
    with open_index(flat_dir) as hnsw:
        queries = [q.question for q in world.questions[:40]]
        a = [h[0].id for h in hnsw.search(queries, 1)]
        b = [h[0].id for h in world_dense.search(queries, 1)]
        assert sum(x == y for x, y in zip(a, b, strict=True)) >= 38
        assert json.loads((flat_dir / "meta.json").read_text())["index_type"] == "hnsw"


def test_dense_build_resumes_after_interruption(tmp_path, monkeypatch):
    from agentrl.retrievers import dense

    monkeypatch.setattr(dense, "CHUNK", 100)
    world = generate_world(1, 250)
    corpus = write_corpus(world.passages, tmp_path / "c.jsonl")
    encoded: list[int] = []
    original = dense.Encoder.encode

    def interrupted(self, texts, batch_size=16, progress=None):
        if len(encoded) == 1:
            raise KeyboardInterrupt  # the build dies after its first chunk
        encoded.append(len(texts))
        return original(self, texts, batch_size, progress)

    monkeypatch.setattr(dense.Encoder, "encode", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_index(corpus, "dense", tmp_path / "idx")
    assert encoded == [100] and not (tmp_path / "idx" / "meta.json").exists()

    def counting(self, texts, batch_size=16, progress=None):
        encoded.append(len(texts))
        return original(self, texts, batch_size, progress)

    monkeypatch.setattr(dense.Encoder, "encode", counting)
    build_index(corpus, "dense", tmp_path / "idx")
    assert encoded == [100, 100, 50]  # only the missing chunks were encoded
    with open_index(tmp_path / "idx") as retriever:
        assert retriever.index.ntotal == 250
        stored = retriever.index.reconstruct_n(0, 250)
        texts = [p["contents"] for p in world.passages]
        direct = original(retriever.encoder, texts[:5] + texts[-5:], 16)
        assert np.allclose(stored[list(range(5)) + list(range(245, 250))], direct, atol=1e-4)


def test_load_qa_formats(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    flashrag = tmp_path / "nq.jsonl"
    flashrag.write_text(json.dumps({"id": "a", "question": "who?", "golden_answers": ["X", "Y"]}) + "\n")
    hotpot = tmp_path / "hotpot.json"
    hotpot.write_text(json.dumps([{"_id": "h1", "question": "where?", "answer": "Z"}]))
    search_r1 = tmp_path / "train.parquet"
    pq.write_table(
        pa.Table.from_pylist(
            [
                {
                    "data_source": "nq",
                    "question": "what?",
                    "ability": "fact-reasoning",
                    "reward_model": {"style": "rule", "ground_truth": {"target": ["T1", "T2"]}},
                    "extra_info": {"split": "train", "index": 0},
                }
            ]
        ),
        search_r1,
    )
    assert load_qa(flashrag)[0].answers == ("X", "Y")
    assert load_qa(hotpot)[0].answers == ("Z",) and load_qa(hotpot)[0].id == "h1"
    item = load_qa(search_r1)[0]
    assert item.question == "what?" and item.answers == ("T1", "T2")
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({"question": "q"}) + "\n")
    with pytest.raises(ValueError, match="row 0: no gold answers"):
        load_qa(broken)


def test_cli_build_and_serve(tmp_path):
    import subprocess
    import sys
    import time

    import httpx
    from support import answers_after_idling, free_port

    from agentrl.cli import main

    assert (
        main(
            [
                "index",
                "build",
                "--corpus",
                "synthetic:300:5",
                "--backend",
                "bm25",
                "--out",
                str(tmp_path / "i"),
            ]
        )
        == 0
    )
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentrl",
            "retrieve",
            "serve",
            "--index",
            str(tmp_path / "i"),
            "--port",
            str(port),
        ]
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                response = httpx.post(
                    f"http://127.0.0.1:{port}/retrieve", json={"queries": ["company"], "topk": 2}
                )
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and server.poll() is None
                time.sleep(0.2)
        assert response.status_code == 200 and len(response.json()["result"][0]) == 2
        assert answers_after_idling(f"http://127.0.0.1:{port}", "/health")  # as every agentrl server
    finally:
        server.terminate()
        server.wait(timeout=30)
