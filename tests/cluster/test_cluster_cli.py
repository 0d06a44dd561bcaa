"""The command line of clusters: `--processes` (default: one process, as before) and `--ray`."""

from __future__ import annotations

import os

import pytest

from agentrl.cli import build_parser
from agentrl.protocol import is_cluster_url


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


def test_sandbox_serve_stays_one_process_by_default_and_takes_processes():
    from agentrl.sandbox_server.cli import process_count

    assert build_parser().parse_args(["sandbox", "serve"]).processes is None
    assert process_count("auto") == len(os.sched_getaffinity(0)) and process_count("3") == 3


@pytest.mark.parametrize("argv", [["--processes", "0"], ["--processes", "two"],
                                  ["--processes", "2", "--holder", "no spaces"],
                                  ["--processes", "2", "--image", "agentrl-no-such-image:0"]])
def test_sandbox_serve_refuses_a_bad_count_or_holder_name(argv, capsys):
    args = build_parser().parse_args(["sandbox", "serve", *argv])
    assert args.handler(args) == 2
    assert "error:" in capsys.readouterr().err


def test_each_sandbox_process_gets_the_parent_s_settings_but_its_port_and_name():
    from agentrl.sandbox_server.cli import child_args

    given = ["--pool-size", "3", "--max-sandboxes", "40", "--tenant", "a=tok-a:5", "--allow-image", "img:1",
             "--image", "img:0", "--max-pending", "4", "--heavy-calls", "2", "--max-json-mb", "8"]
    parent = build_parser().parse_args(["sandbox", "serve", "--processes", "2", "--port", "9000", *given])
    child = build_parser().parse_args(["sandbox", "serve", *child_args(parent, "sbx-p1", 41000)])
    differs = {k for k in vars(parent) if vars(parent)[k] != vars(child)[k]}
    assert differs == {"port", "processes", "holder"}
    assert (child.port, child.holder, child.processes) == (41000, "sbx-p1", None)


def test_serve_ray_takes_sandboxes_per_node():
    assert build_parser().parse_args(["serve", "--ray", "--ray-sandboxes"]).ray_sandboxes
    assert not build_parser().parse_args(["serve", "--ray"]).ray_sandboxes
