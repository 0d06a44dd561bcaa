"""Lucene BM25 through pyserini: real Anserini indexes, and agreement with the bm25s backend."""

from __future__ import annotations

import httpx
import pytest
from search_helpers import require_java
from support import AppServer

from agentrl.retrievers import build_index, open_index, split_title
from agentrl.retrievers.lucene import MAX_QUERY_CHARS
from agentrl.retrievers.server import create_app

pytestmark = pytest.mark.java


@pytest.fixture(scope="module")
def wiki_lucene_index(wiki_file, tmp_path_factory):
    require_java()
    return build_index(wiki_file, "lucene", tmp_path_factory.mktemp("lucene") / "wiki")


@pytest.fixture(scope="module")
def wiki_lucene(wiki_lucene_index):
    with open_index(wiki_lucene_index) as retriever:
        yield retriever


def test_lucene_and_bm25s_agree_on_top1(wiki_lucene, wiki_bm25, wiki_questions, record_property):
    queries = [q.question for q in wiki_questions] + [q.evidence[0] for q in wiki_questions]
    lucene = wiki_lucene.search(queries, 1)
    light = wiki_bm25.search(queries, 1)
    agree = sum(
        (a[0].id if a else None) == (b[0].id if b else None) for a, b in zip(lucene, light, strict=True)
    )
    rate = agree / len(queries)
    record_property("top1_agreement", rate)
    print(f"\nLucene vs bm25s top-1 agreement: {agree}/{len(queries)} = {rate:.3f}")
    assert rate >= 0.95
    # the scores are the same BM25 (k1=0.9, b=0.4), up to Lucene's lossy length norms
    for a, b in zip(lucene[:50], light[:50], strict=True):
        if a and b and a[0].id == b[0].id:
            assert a[0].score == pytest.approx(b[0].score, rel=0.05)


def test_a_closed_lucene_retriever_says_so(wiki_lucene_index):
    retriever = open_index(wiki_lucene_index)
    retriever.close()
    with pytest.raises(RuntimeError, match="closed"):
        retriever.search(["Eiffel Tower Paris"])


def test_lucene_returns_raw_documents(wiki_lucene, wiki_rows):
    by_id = {r["id"]: r["contents"] for r in wiki_rows}
    hits = wiki_lucene.search(["Eiffel Tower Paris", "qqqzzzxxx", "Albert Einstein relativity"], 3)
    assert len(hits[0]) == 3 and hits[1] == []
    for hit in hits[0] + hits[2]:
        assert by_id[hit.id] == hit.contents
    assert split_title(hits[2][0].contents)[0] == "Albert Einstein"


def test_lucene_behind_search_r1_server(wiki_lucene):
    with AppServer(create_app(wiki_lucene)) as live:
        payload = {"queries": ["Eiffel Tower", "Mount Everest height"], "topk": 3, "return_scores": True}
        body = httpx.post(live.url + "/retrieve", json=payload, timeout=60).json()
    assert [len(r) for r in body["result"]] == [3, 3]
    assert body["result"][1][0]["document"]["contents"].startswith('"Mount Everest"')


def test_an_over_long_query_is_truncated_and_hurts_only_itself(wiki_lucene):
    # 1,500 distinct words: past Lucene's default limit of 1,024 clauses, under MAX_QUERY_CHARS
    wordy = " ".join(f"zq{i}x" for i in range(1500)) + " Everest"
    # far past MAX_QUERY_CHARS: what comes after the cut is not searched
    endless = " ".join(f"zq{i}x" for i in range(5000)) + " Everest"
    assert len(wordy) < MAX_QUERY_CHARS < len(endless)
    hits = wiki_lucene.search(["Eiffel Tower", wordy, endless, "Mount \ud800 Everest", "Albert Einstein"], 3)
    assert split_title(hits[0][0].contents)[0] == "Eiffel Tower"
    assert split_title(hits[1][0].contents)[0] == "Mount Everest"
    assert hits[2] == []
    assert split_title(hits[3][0].contents)[0] == "Mount Everest"
    assert split_title(hits[4][0].contents)[0] == "Albert Einstein"
    with AppServer(create_app(wiki_lucene)) as live:
        payload = {"queries": ["Eiffel Tower", endless, wordy], "topk": 2}
        response = httpx.post(live.url + "/retrieve", json=payload, timeout=60)
    assert response.status_code == 200
    assert [len(r) for r in response.json()["result"]] == [2, 0, 2]


def test_lucene_build_rejects_a_bad_corpus(tmp_path):
    require_java()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1"}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:1"):
        build_index(bad, "lucene", tmp_path / "idx")
