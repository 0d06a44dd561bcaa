"""Fixtures of the cluster tests: real server processes on loopback ports."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_helpers import ServedCluster, need_ray


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
