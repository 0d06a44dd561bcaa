"""Fuzzing the HTTP API from its own OpenAPI schema: bad input is a clear 4xx, never a 500."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.docker


def test_api_never_fails_with_a_server_error(server):
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 8
    cases = st.one_of(*(op.as_strategy() for op in operations))

    @given(case=cases)
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    def check(case) -> None:
        response = case.call(headers={"Authorization": f"Bearer {server.token}"}, timeout=120)
        assert response.status_code < 500, (case.method, case.path, response.status_code, response.text[:500])
        if response.status_code >= 400:
            assert response.json().get("detail")

    check()
