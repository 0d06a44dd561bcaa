"""Fuzzing the HTTP API: schemathesis against the OpenAPI schema, hypothesis against real episodes.

Whatever arrives, the answer is a documented 2xx/4xx with the error shape, never a 5xx; bodies
holding NaN or Infinity (which Python's JSON reader accepts and JSON does not have) are refused
with a message, on every route and socket that reads JSON.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from openapi_conformance import cases_run, check_conformance
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from server_helpers import ECHO
from websockets.sync.client import connect

from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread

FUZZ = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@pytest.fixture(scope="module")
def echo_only_url() -> Iterator[str]:
    with serve_in_thread(ServerConfig(env_ids=(ECHO,), max_episodes=4096)) as url:
        yield url


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def test_openapi_operations_never_answer_5xx(echo_only_url):
    # driven by hand: schemathesis' pytest plugin does not load under this pytest version
    schema = schemathesis.openapi.from_url(f"{echo_only_url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10

    for operation, mode in itertools.product(operations, GenerationMode):
        try:
            fuzz_operation(operation, mode)
        except Unsatisfiable:
            assert mode is GenerationMode.NEGATIVE  # an operation without inputs has no invalid input


def test_the_openapi_document_tells_the_truth_to_schemathesis_with_every_check(echo_only_url, tmp_path):
    # what is dropped, and why, is in openapi_hooks.py next to this file
    report = check_conformance(echo_only_url, hooks=Path(__file__).with_name("openapi_hooks.py"),
                               cwd=tmp_path, max_examples=40)
    assert cases_run(report) >= 500, report[-3000:]


def test_integers_are_json_schema_integers_and_a_405_names_every_method_of_its_path(echo_only_url):
    with httpx.Client(base_url=echo_only_url) as http:
        eid = http.post("/v1/episodes", json={"env_id": ECHO, "seed": 3.0}).json()["episode_id"]  # 3.0 is 3
        for seed in (False, True, "3", 3.5):  # pydantic's lax int would take the first three
            assert refused(http.post("/v1/episodes", json={"env_id": ECHO, "seed": seed})).startswith("seed")
            assert refused(http.post(f"/v1/episodes/{eid}/reset", json={"seed": seed})).startswith("seed")
        assert refused(http.post(f"/v1/episodes/{eid}/fork", json={"n": True})).startswith("n:")
        assert http.post(f"/v1/episodes/{eid}/reset", json={"seed": 3.0}).status_code == 200
        for path, allow in (("/v1/episodes", "GET, POST"), (f"/v1/episodes/{eid}", "GET, DELETE"),
                            (f"/v1/episodes/{eid}/step", "POST")):
            r = http.request("PATCH", path)
            assert (r.status_code, r.headers["allow"]) == (405, allow), path


def fuzz_operation(operation, mode) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @FUZZ
    def check(case):
        response = case.call()
        case.validate_response(response, checks=CHECKS)
        if response.status_code >= 400:
            assert set(response.json()) == {"error", "message"}, operation.label

    check()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@given(action=st.text(max_size=300), request_id=st.none() | st.text(max_size=140), extra=json_values)
@FUZZ
def test_steps_with_arbitrary_bodies_never_answer_5xx(echo_only_url, action, request_id, extra):
    with httpx.Client(base_url=echo_only_url) as http:
        eid = http.post("/v1/episodes", json={"env_id": ECHO, "seed": 0}).json()["episode_id"]
        for body in ({"action": action, "request_id": request_id}, {"action": extra}, extra):
            r = http.post(f"/v1/episodes/{eid}/step", json=body)
            assert r.status_code in (200, 409, 422), r.text
        r = http.post("/v1/step", json={"steps": [{"episode_id": eid, "action": action}, extra]})
        assert r.status_code in (200, 422)
        as_dict = extra if isinstance(extra, dict) else None
        r = http.post("/v1/episodes", json={"env_id": ECHO, "options": as_dict, "env_kwargs": as_dict})
        assert r.status_code in (201, 400, 422), r.text
        http.delete(f"/v1/episodes/{eid}")


# --- numbers JSON does not have ------------------------------------------------------------------
# Python's JSON reader takes the tokens NaN, Infinity and -Infinity; JSON has no such numbers, and an
# env handed one (`{"max_turns": NaN}`) could misbehave forever. Each is refused with a message.
non_finite = st.sampled_from([math.nan, math.inf, -math.inf])
poisoned = st.recursive(  # every leaf non-finite, so the value holds at least one wherever it sits
    non_finite,
    lambda inner: st.lists(inner, min_size=1, max_size=3)
    | st.dictionaries(st.text(max_size=6), inner, min_size=1, max_size=3),
    max_leaves=6,
)
poisoned_object = st.builds(
    lambda base, key, bad: {**base, key: bad},
    st.dictionaries(st.text(max_size=6), json_values, max_size=3),
    st.text(max_size=6),
    poisoned,
)


def step_socket(base_url: str):
    return connect(base_url.replace("http://", "ws://") + "/v1/ws", compression=None, proxy=None)


def raw_json(value: object) -> bytes:
    """`value` as Python's JSON writer spells it: NaN and Infinity as bare tokens."""
    return json.dumps(value, allow_nan=True).encode()


def refused(response: httpx.Response) -> str:
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    body = response.json()
    assert set(body) == {"error", "message"} and body["message"], body
    return body["message"]


@given(bad_object=poisoned_object, bad_value=poisoned, action=st.text(max_size=40))
@FUZZ
def test_non_finite_numbers_are_refused_with_a_message_and_the_connection_stays_usable(
    echo_only_url, bad_object, bad_value, action
):
    headers = {"content-type": "application/json"}
    with httpx.Client(base_url=echo_only_url, headers=headers) as http:
        eid = http.post("/v1/episodes", json={"env_id": ECHO, "seed": 0}).json()["episode_id"]
        for body in (
            {"env_id": ECHO, "options": bad_object},
            {"env_id": ECHO, "env_kwargs": bad_object},
            {"env_id": ECHO, "seed": bad_value},
        ):
            message = refused(http.post("/v1/episodes", content=raw_json(body)))
            assert "NaN" in message or "finite" in message or "valid" in message, message
        assert "NaN and Infinity" in refused(
            http.post(f"/v1/episodes/{eid}/reset", content=raw_json({"options": bad_object}))
        )
        step = f"/v1/episodes/{eid}/step"
        refused(http.post(step, content=raw_json({"action": bad_value})))
        refused(http.post(step, content=raw_json({"action": action, "request_id": bad_value})))
        batch = {"steps": [{"episode_id": eid, "action": bad_value}]}
        refused(http.post("/v1/step", content=raw_json(batch)))
        # the same connection goes on serving well-formed requests
        assert http.post(step, json={"action": action}).status_code == 200
        assert http.delete(f"/v1/episodes/{eid}").status_code == 200
    with step_socket(echo_only_url) as ws:
        ws.send(raw_json({"id": 3, "steps": [{"episode_id": "e", "action": bad_value}]}))
        reply = json.loads(ws.recv())
        assert reply["status"] == 422 and reply["error"]["message"], reply
        ws.send(raw_json({"id": 4, "steps": []}))
        assert json.loads(ws.recv()) == {"id": 4, "results": []}


@given(bad_object=poisoned_object)
@FUZZ
def test_openenv_socket_refuses_non_finite_numbers_and_keeps_serving(echo_only_url, bad_object):
    with connect(echo_only_url.replace("http://", "ws://") + "/openenv/" + ECHO + "/ws", proxy=None) as ws:
        for data in ({"options": bad_object}, bad_object):
            ws.send(raw_json({"type": "reset", "data": data}).decode())
            reply = json.loads(ws.recv())
            assert reply["type"] == "error" and "NaN and Infinity" in reply["data"]["message"], reply
        ws.send("[" * 100_000 + "]" * 100_000)  # deeper than the reader goes
        assert json.loads(ws.recv())["data"]["code"] == "INVALID_JSON"
        ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
        assert json.loads(ws.recv())["type"] == "observation"
