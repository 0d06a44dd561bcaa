"""Fixtures of the cluster tests: real server processes on loopback ports."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_helpers import ProcessCluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[ProcessCluster]:
    """Two holders serving Echo-v0 and Flights-v0, shared by a test module."""
    made = ProcessCluster(2)
    try:
        made.wait_up(2)
        yield made
    finally:
        made.stop()
