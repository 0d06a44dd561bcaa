"""Fixtures of the cluster tests: real server processes on loopback ports."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from cluster_helpers import RAY_ENV, ServedCluster, need_ray

os.environ.update(RAY_ENV)  # before anything here imports Ray, which reads it once (tests/run sets it too)


@pytest.fixture(scope="module", params=["processes", "ray"])
def cluster(request) -> Iterator[ServedCluster]:
    """Two holders serving Echo-v0 and Flights-v0 (processes, then Ray actors), shared by a module."""
    if request.param == "ray":
        need_ray()
    made = ServedCluster(request.param, 2)
    try:
        made.wait_up(2)
        yield made
    finally:
        made.stop()
