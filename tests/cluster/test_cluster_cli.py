"""The command line of clusters: `--processes` (default: one process, as before) and `--ray`."""

from __future__ import annotations

import os

import pytest

from agentrl.cli import build_parser
from agentrl.server.wire import is_cluster_url


def test_one_process_stays_the_default():
    args = build_parser().parse_args(["serve"])
    assert args.processes is None and not args.ray


def test_processes_auto_is_the_cores_this_process_may_use():
    args = build_parser().parse_args(["serve", "--processes", "auto"])
    assert args.processes == len(os.sched_getaffinity(0))
    assert build_parser().parse_args(["serve", "--processes", "3"]).processes == 3


@pytest.mark.parametrize("bad", ["0", "-1", "two"])
def test_a_bad_process_count_is_refused(bad, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--processes", bad])
    assert "positive number of processes or 'auto'" in capsys.readouterr().err


def test_a_client_tells_a_cluster_from_a_server_by_its_url():
    assert is_cluster_url("http://127.0.0.1:8000/v1/cluster")
    assert is_cluster_url("http://127.0.0.1:8000/v1/cluster/")
    assert not is_cluster_url("http://127.0.0.1:8000")
    assert not is_cluster_url("http://cluster:8000/")
