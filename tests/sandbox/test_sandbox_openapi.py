"""The sandbox server's OpenAPI document tells the truth: what its schemas admit is what it accepts.

Schemathesis with every check runs against a real server on Docker; the schemas' patterns and the
validators they stand for are held to agree here without one, value by value.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openapi_conformance import cases_run, check_conformance
from pydantic import ValidationError
from support import AppServer, unavailable

from agentrl.sandbox_server.api.app import create_app
from agentrl.sandbox_server.wire.errors import DockerUnavailable, InvalidRequest
from agentrl.sandbox_server.wire.models import (
    BASE64_PATTERN,
    PATH_PATTERN,
    CreateSandboxRequest,
    ExecRequest,
    RelayRequest,
    RunCodeRequest,
    decode_base64,
)
from agentrl.sandbox_server.wire.paths import check_path

TOKEN = "openapi-token"


def schema_of(model) -> jsonschema_rs.Validator:
    return jsonschema_rs.validator_for(model.model_json_schema())


def accepts(model, body: object) -> bool:
    try:
        model.model_validate_json(json.dumps(body))
    except ValidationError:
        return False
    return True


EXEC_BODIES = [
    {},
    {"command": "ls"},
    {"code": "print(1)"},
    {"command": "ls", "code": "x"},
    {"command": None},
    {"command": "ls", "code": None},
    {"command": "ls", "language": "PYTHON"},
    {"code": "x", "language": "cobol"},
    {"command": "ls", "keep_alive": "yes"},
    {"command": "ls", "keep_alive": 1},
    {"command": "ls", "keep_alive": True},
    {"command": "ls", "max_output_bytes": 100.0},
    {"command": "ls", "max_output_bytes": True},
    {"command": "ls", "max_output_bytes": 100.5},
    {"command": "ls", "timeout_s": "5"},
    {"command": "ls", "timeout_s": 5},
    {"command": "ls", "stdin": "a", "stdin_b64": "QQ=="},
    {"command": "ls", "stdin": "a", "stdin_b64": None},
    {"command": "ls", "stdin_b64": "QQ="},
    {"command": "ls", "stdin_b64": "QQ=="},
    {"command": "ls", "mode": "x"},
]
RELAY_BODIES = [
    {},
    {"port": 80, "data": "x"},
    {"port": 0, "data": "x"},
    {"port": 65536, "data": "x"},
    {"port": 80.0, "data": "x"},
    {"port": "80", "data": "x"},
    {"port": True, "data": "x"},
    {"port": 80},
    {"port": 80, "data": None},
    {"port": 80, "data": "x", "timeout_s": 0},
    {"port": 80, "data": "x", "timeout_s": "1"},
    {"port": 80, "data": "x", "max_output_bytes": 0},
    {"port": 80, "data": "x", "max_output_bytes": 1.5},
    {"port": 80, "data": "x", "max_output_bytes": 2.0},
    {"port": 80, "data": "x", "host": "example.com"},
    {"port": 80, "data": "x", "reply_ends": "line"},
    {"port": 80, "data": "x", "reply_ends": "close"},
    {"port": 80, "data": "x", "reply_ends": "lines"},
    {"port": 80, "data": "x", "reply_ends": None},
    {"port": 80, "data": "x", "reply_ends": True},
]
SPEC_BODIES = [
    {},
    {"cpus": "1.5"},
    {"cpus": True},
    {"memory_mb": 64.0},
    {"memory_mb": "64"},
    {"pids": False},
    {"env": {"A_1": "x"}},
    {"env": {"1A": "x"}},
    {"env": {"A": "x\u0000"}},
    {"env": {"": ""}},
    {"env": {"ÎÅ": ""}},
    {"files": {"a.txt": "QQ=="}},
    {"ttl_s": 0},
    {"idle_ttl_s": 1e-300},
]
RUN_CODE_BODIES = [
    {"code": "x"},
    {},
    {"code": "x", "memory_limit_MB": True},
    {"code": "x", "memory_limit_MB": 64.0},
    {"code": "x", "run_timeout": "3"},
    {"code": "x", "language": "Bash"},
    {"code": "x", "language": "go"},
    {"code": "x", "unknown": 1},
]


@pytest.mark.parametrize(
    ("model", "bodies"),
    [
        (ExecRequest, EXEC_BODIES),
        (RelayRequest, RELAY_BODIES),
        (CreateSandboxRequest, SPEC_BODIES),
        (RunCodeRequest, RUN_CODE_BODIES),
    ],
)
def test_each_request_schema_admits_exactly_what_its_model_accepts(model, bodies):
    schema = schema_of(model)
    disagree = [body for body in bodies if schema.is_valid(body) != accepts(model, body)]
    assert not disagree, disagree


def test_a_json_body_has_no_binary_string():
    # bytes of stdin travel as base64 in `stdin_b64`; a `format: binary` string is no JSON value
    assert "binary" not in json.dumps(ExecRequest.model_json_schema())


def path_accepted(path: str) -> bool:
    try:
        check_path(path)
    except InvalidRequest:
        return False
    return True


path_parts = st.sampled_from(["", ".", "..", "...", "..a", ".a", "a", "a..", "é", "\u0000", " ", "\n"])
paths = st.lists(path_parts, max_size=5).map("/".join) | st.text(max_size=12)


@given(path=paths)
@settings(max_examples=300, deadline=None, derandomize=True)
def test_the_path_pattern_admits_exactly_the_paths_the_server_takes(path):
    # short paths: their byte lengths are checked by the server alone (see openapi_hooks.py)
    assert jsonschema_rs.validator_for({"type": "string", "pattern": PATH_PATTERN}).is_valid(
        path
    ) == path_accepted(path), repr(path)


def decodes(text: str) -> bool:
    """What the server takes as base64 (`decode_base64`, used by every route that reads it)."""
    try:
        decode_base64(text)
    except (binascii.Error, ValueError):
        return False
    return True


@given(
    text=st.text(alphabet="AQZaz09+/=\n -_", max_size=10)
    | st.binary(max_size=7).map(lambda b: base64.b64encode(b).decode())
)
@settings(max_examples=300, deadline=None, derandomize=True)
def test_the_base64_pattern_admits_exactly_what_decodes(text):
    assert jsonschema_rs.validator_for({"type": "string", "pattern": BASE64_PATTERN}).is_valid(
        text
    ) == decodes(text), repr(text)


@pytest.fixture(scope="module")
def local_server() -> Iterator[AppServer]:
    """A server over the unisolated local backend: these tests start no sandbox."""
    from agentrl.sandbox_server.sandboxes.local_backend import LocalBackend

    with pytest.warns(UserWarning, match="WITHOUT ANY ISOLATION"):
        backend = LocalBackend(max_sandboxes=2)
    with AppServer(create_app(backend, token=TOKEN), token=TOKEN) as srv:
        yield srv
    backend.close()


def test_a_405_names_every_method_of_its_path_and_unread_bodies_answer_a_declared_422(local_server):
    with httpx.Client(base_url=local_server.url, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        for path, allow in (
            ("/v1/sandboxes", "GET, POST"),
            ("/v1/sandboxes/x", "GET, DELETE"),
            ("/v1/sandboxes/x/files", "GET, PUT"),
            ("/run_code", "POST"),
        ):
            r = http.request("OPTIONS", path)
            assert (r.status_code, r.headers.get("allow"), r.json()["kind"]) == (405, allow, "http_error"), (
                path
            )
        document = http.get("/openapi.json").json()
        for path in ("/v1/sandboxes", "/run_code"):  # bodies read by the route itself, once it has its turn
            r = http.post(path)
            assert r.status_code == 422 and r.json()["detail"], r.text
            assert "422" in document["paths"][path]["post"]["responses"], path
    assert "requestBody" in document["paths"]["/v1/sandboxes/{sandbox_id}/files"]["put"]


@pytest.fixture(scope="module")
def docker_server() -> Iterator[AppServer]:
    """A server of its own with few sandboxes: a stateful run creates them faster than they end, and
    closing its backend removes every one."""
    from agentrl.sandbox_server.sandboxes.docker_backend import DockerBackend

    try:
        backend = DockerBackend(pool_size=1, max_sandboxes=6, reap_interval_s=0.5)
    except DockerUnavailable as exc:
        unavailable(str(exc).splitlines()[0])
    with AppServer(create_app(backend, token=TOKEN, max_request_bytes=8 << 20), token=TOKEN) as srv:
        yield srv
    backend.close()


@pytest.mark.docker
def test_the_openapi_document_tells_the_truth_to_schemathesis_with_every_check(docker_server, tmp_path):
    # what is dropped, and why, is in openapi_hooks.py next to this file
    report = check_conformance(
        docker_server.url,
        hooks=Path(__file__).with_name("openapi_hooks.py"),
        cwd=tmp_path,
        max_examples=30,
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert cases_run(report) >= 300, report[-3000:]
