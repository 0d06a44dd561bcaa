"""The retrieval server speaks Search-R1's `/retrieve` exactly, on a real server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import AppServer

from agentrl.retrievers import Hit, Retriever
from agentrl.retrievers.server import create_app
from agentrl.search.env import render_passages

JSON = "application/json"


def passages2string(retrieval_result: list[dict]) -> str:
    """Search-R1's trainer code (`_passages2string`), as it consumes the response."""
    format_reference = ""
    for idx, doc_item in enumerate(retrieval_result):
        content = doc_item["document"]["contents"]
        title = content.split("\n")[0]
        text = "\n".join(content.split("\n")[1:])
        format_reference += f"Doc {idx + 1}(Title: {title}) {text}\n"
    return format_reference


def test_search_r1_trainer_request(world_server, world):
    # the request Search-R1's generation loop sends (`_batch_search`)
    queries = [q.question for q in world.questions[:5]]
    payload = {"queries": queries, "topk": 3, "return_scores": True}
    response = httpx.post(world_server.url + "/retrieve", json=payload, timeout=30)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"result"}
    assert len(body["result"]) == len(queries)
    for per_query, question in zip(body["result"], world.questions[:5], strict=True):
        assert len(per_query) == 3
        for item in per_query:
            assert set(item) == {"document", "score"}
            assert set(item["document"]) == {"id", "contents"}
            assert isinstance(item["document"]["id"], str) and isinstance(item["score"], float)
        scores = [item["score"] for item in per_query]
        assert scores == sorted(scores, reverse=True)
        # the trainer's rendering works on it and the evidence passage is among the hits
        rendered = passages2string(per_query)
        assert rendered == render_passages(
            [Hit(i["document"]["id"], i["document"]["contents"], 0) for i in per_query]
        )
        assert rendered.startswith("Doc 1(Title: ") and rendered.count("\nDoc ") == 2
        assert f'"{question.evidence[0]}"' in rendered


def test_single_query_form_and_no_scores(world_server, world):
    question = world.questions[0].question
    single = httpx.post(world_server.url + "/retrieve", json={"query": question, "topk": 2}).json()
    batch = httpx.post(world_server.url + "/retrieve", json={"queries": [question], "topk": 2}).json()
    assert single == batch
    assert len(single["result"]) == 1 and len(single["result"][0]) == 2
    assert set(single["result"][0][0]) == {"id", "contents"}  # without scores: the document alone


def test_default_topk_and_empty_batch(world_server):
    body = httpx.post(world_server.url + "/retrieve", json={"queries": ["company founded"]}).json()
    assert len(body["result"][0]) == 3
    assert httpx.post(world_server.url + "/retrieve", json={"queries": []}).json() == {"result": []}


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"queries": "not a list"},
        {"queries": ["x"], "topk": 0},
        {"queries": ["x"], "topk": 10_000},
        {"query": 3.5, "topk": "many"},
    ],
)
def test_bad_requests_are_422_not_500(world_server, payload):
    response = httpx.post(world_server.url + "/retrieve", json=payload)
    assert response.status_code == 422
    assert "detail" in response.json()


# arbitrary JSON, as Python's writer spells it: NaN and Infinity as bare tokens, integers past 64 bits
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63, max_value=10**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["queries", "query", "topk", "return_scores", "x"]), inner, max_size=4
        )
    ),
    max_leaves=8,
)
non_finite = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
raw_bodies = st.one_of(
    json_values.map(json.dumps),
    # the request's own fields holding a number JSON has no spelling for, or one past any integer type
    st.tuples(st.sampled_from(["topk", "return_scores", "query"]), non_finite).map(
        lambda kv: f'{{"queries": ["a"], "{kv[0]}": {kv[1]}}}'
    ),
    non_finite.map(lambda token: f'{{"queries": [{token}], "topk": 1}}'),
    st.integers(20, 6000).map(lambda digits: '{"queries": ["a"], "topk": ' + "9" * digits + "}"),
    # nested deeper than any reader goes, in the body or in a field
    st.integers(500, 100_000).map(lambda depth: "[" * depth + "]" * depth),
    st.integers(500, 100_000).map(lambda depth: '{"queries": ' + "[" * depth + "]" * depth + "}"),
    st.text(max_size=40),
)


def local_port(response: httpx.Response) -> int:
    """The client-side port the response came back on: the same port, the same connection."""
    return response.extensions["network_stream"].get_extra_info("client_addr")[1]


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_topk_answers_422_and_the_connection_stays_usable(world_server, token):
    with httpx.Client(base_url=world_server.url, timeout=30) as http:
        good = {"queries": ["company founded"], "topk": 2}
        first = http.post("/retrieve", json=good)
        bad = http.post(
            "/retrieve", content=f'{{"queries": ["a"], "topk": {token}}}', headers={"content-type": JSON}
        )
        assert bad.status_code == 422
        assert bad.json() == {"detail": "topk: Input should be a finite number"}
        again = http.post("/retrieve", json=good)  # the same client, kept alive
        assert again.status_code == 200 and again.json() == first.json()
        assert local_port(first) == local_port(bad) == local_port(again)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=raw_bodies)
def test_fuzzed_bodies_never_500_and_errors_say_what_is_wrong(world_server, body):
    with httpx.Client(base_url=world_server.url, timeout=30) as http:
        response = http.post("/retrieve", content=body.encode(), headers={"content-type": JSON})
        assert response.status_code in (200, 400, 422), (response.status_code, response.text)
        answer = response.json()
        if response.status_code != 200:
            assert isinstance(answer["detail"], str) and answer["detail"], answer
        good = http.post("/retrieve", json={"query": "company", "topk": 1})
        assert good.status_code == 200 and local_port(good) == local_port(response)


def test_concurrent_requests_are_batched_and_answered_correctly(world_server, world, world_bm25_dir):
    from agentrl.retrievers import open_index

    questions = [q.question for q in world.questions[:48]]
    with open_index(world_bm25_dir) as local:
        expected = [[h.id for h in hits] for hits in local.search(questions, 3)]
    before = httpx.get(world_server.url + "/health").json()["batches"]

    def ask(q: str) -> list[str]:
        body = httpx.post(world_server.url + "/retrieve", json={"query": q, "topk": 3}, timeout=60).json()
        return [item["id"] for item in body["result"][0]]

    with ThreadPoolExecutor(16) as pool:
        got = list(pool.map(ask, questions))
    assert got == expected
    batches = httpx.get(world_server.url + "/health").json()["batches"] - before
    assert 1 <= batches <= len(questions)


class SlowRetriever(Retriever):
    """Holds the worker busy so the queue fills: the only double here, standing in for load."""

    backend = "slow"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.threads: set[str] = set()

    def search(self, queries, k=3):
        self.threads.add(threading.current_thread().name)
        self.release.wait(timeout=20)
        return [[Hit("1", '"T"\nbody', 1.0)] for _ in queries]


def test_full_queue_answers_503_and_one_thread_touches_the_retriever():
    retriever = SlowRetriever()
    with AppServer(create_app(retriever, queue_size=1, max_batch=1)) as live, ThreadPoolExecutor(8) as pool:
        futures = [
            pool.submit(httpx.post, live.url + "/retrieve", json={"query": "q"}, timeout=30) for _ in range(8)
        ]
        time.sleep(1.0)
        retriever.release.set()
        codes = sorted(f.result().status_code for f in futures)
    assert 503 in codes and 200 in codes
    assert retriever.threads == {"retriever"}


class FailsOnBoom(Retriever):
    """Fails any batch holding the query "boom", the way Lucene failed a batch holding one query
    of too many clauses; the first search waits, so the requests after it are batched together."""

    backend = "boom"

    def __init__(self) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        self.batches: list[list[str]] = []

    def search(self, queries, k=3):
        if not self.batches:
            self.entered.set()
            self.release.wait(timeout=20)
        self.batches.append(list(queries))
        if "boom" in queries:
            raise RuntimeError("this query breaks the backend")
        return [[Hit("1", f'"{q}"\nbody', 1.0)] for q in queries]


def test_a_failing_query_fails_only_its_own_request():
    retriever = FailsOnBoom()
    app = create_app(retriever)
    with AppServer(app) as live, ThreadPoolExecutor(4) as pool:
        post = lambda q: httpx.post(live.url + "/retrieve", json={"query": q}, timeout=30)  # noqa: E731
        first = pool.submit(post, "hold")
        assert retriever.entered.wait(timeout=20)
        rest = [pool.submit(post, q) for q in ("good", "boom", "also good")]
        deadline = time.monotonic() + 20
        while app.state.worker.jobs.qsize() < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        retriever.release.set()
        codes = [f.result().status_code for f in [first, *rest]]
        bodies = [f.result().json() for f in [first, *rest]]
    assert codes == [200, 200, 500, 200]
    assert bodies[1]["result"][0][0]["contents"].startswith('"good"')
    assert "this query breaks the backend" in bodies[2]["detail"]
    assert any(len(batch) > 1 and "boom" in batch for batch in retriever.batches)  # they were batched
