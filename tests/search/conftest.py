"""Shared fixtures for the retriever and Search-v0 tests: small corpora, indexes built once per
session, a real retrieval server on 127.0.0.1, and the Java skip-or-fail rule."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import AppServer

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session", autouse=True)
def _index_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Search-v0 caches built indexes; keep this session's out of the user's cache."""
    old = os.environ.get("AGENTRL_CACHE")
    os.environ["AGENTRL_CACHE"] = str(tmp_path_factory.mktemp("agentrl-cache"))
    yield
    if old is None:
        os.environ.pop("AGENTRL_CACHE", None)
    else:
        os.environ["AGENTRL_CACHE"] = old


@pytest.fixture(scope="session")
def wiki_rows() -> list[dict[str, str]]:
    from agentrl.retrievers.datasets import wiki_corpus

    return wiki_corpus()


@pytest.fixture(scope="session")
def wiki_questions(wiki_rows):
    from agentrl.retrievers.datasets import fanoutqa_questions

    return fanoutqa_questions({r["contents"].split("\n", 1)[0].strip('"') for r in wiki_rows})


@pytest.fixture(scope="session")
def wiki_file(wiki_rows, tmp_path_factory) -> Path:
    from agentrl.retrievers.corpus import write_corpus

    return write_corpus(wiki_rows, tmp_path_factory.mktemp("wiki") / "wiki.jsonl")


@pytest.fixture(scope="session")
def wiki_bm25(wiki_file, tmp_path_factory):
    from agentrl.retrievers import build_index, open_index

    out = build_index(wiki_file, "bm25", tmp_path_factory.mktemp("idx") / "bm25")
    with open_index(out) as retriever:
        yield retriever


@pytest.fixture(scope="session")
def world():
    from agentrl.retrievers.synthetic import generate_world

    return generate_world(seed=7, passages=600)


@pytest.fixture(scope="session")
def world_file(world, tmp_path_factory) -> Path:
    from agentrl.retrievers.corpus import write_corpus

    return write_corpus(world.passages, tmp_path_factory.mktemp("world") / "world.jsonl")


@pytest.fixture(scope="session")
def world_bm25_dir(world_file, tmp_path_factory) -> Path:
    from agentrl.retrievers import build_index

    return build_index(world_file, "bm25", tmp_path_factory.mktemp("idx") / "world-bm25")


@pytest.fixture(scope="session")
def world_server(world_bm25_dir) -> Iterator[AppServer]:
    from agentrl.retrievers import open_index
    from agentrl.retrievers.server import create_app

    with open_index(world_bm25_dir) as retriever, AppServer(create_app(retriever)) as live:
        yield live
