"""The holders of one address, as supervised child processes (`agentrl serve --processes N`) or Ray
actors (`agentrl serve --ray`): their lifetimes, scale-up and drain."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import gymnasium as gym
import httpx
import pytest
from cluster_helpers import ECHO, FLIGHTS, ServedCluster, alive, need_ray

from agentrl.client import EnvClient

pytestmark = pytest.mark.slow


def wait_for(predicate, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if got := predicate():
            return got
        time.sleep(0.1)
    raise AssertionError("not reached in time")


KINDS = ["processes", pytest.param("ray", marks=pytest.mark.ray)]


@pytest.fixture(autouse=True)
def _ray_installed(request):
    if "ray" in request.keywords:
        need_ray()


@pytest.mark.parametrize("kind", KINDS)
def test_holders_have_their_own_loopback_ports_and_die_with_the_parent(kind):
    made = ServedCluster(kind, 2, (ECHO,))
    try:
        holders = made.wait_up(2)
        urls = {h["url"] for h in holders}
        assert len(urls) == 2 and all(u.startswith("http://127.0.0.1:") for u in urls)
        for h in holders:
            assert httpx.get(f"{h['url']}/health").json()["status"] == "healthy"
        pids = [made.holder_pid(h["holder"]) for h in holders] + made.children()
        if kind == "processes":
            assert sorted(pids[:2]) == sorted(made.children())
        made.proc.kill()  # no chance to clean up: the kernel ends the children
        made.proc.wait()
        wait_for(lambda: not any(alive(pid) for pid in pids), 30)
    finally:
        made.stop()


def test_a_killed_holder_is_reported_and_started_again_where_it_was():
    made = ServedCluster("processes", 2, (ECHO,))
    try:
        holders = made.wait_up(2)
        victim = holders[0]
        old_pid = made.holder_pid(victim["holder"])
        os.kill(old_pid, signal.SIGKILL)
        made.wait(lambda hs: next(h for h in hs if h["holder"] == victim["holder"])["state"] != "up",
                  30, "the lost holder reported")
        again = made.wait_up(2)
        assert next(h for h in again if h["holder"] == victim["holder"])["url"] == victim["url"]
        assert made.holder_pid(victim["holder"]) != old_pid
    finally:
        made.stop()
    assert made.proc.returncode in (0, -signal.SIGINT)  # uvicorn re-raises the signal it stopped on
    assert "exited with code -9; restarting it" in made.proc.stderr.read()


def test_a_create_whose_holders_died_is_made_on_one_started_again():
    """Every holder SIGKILLed while the client's map still calls them up: the create meets each one
    gone, then waits (reading the map again) and is made on the first holder its supervisor starts
    again, with the same first observation as in-process; it does not raise `ConnectError` after
    three tries spent in a few milliseconds. A create is not acknowledged before it answers, so
    trying it on another holder is safe, and the cluster holds no copy of it besides the new one."""
    made = ServedCluster("processes", 2, (ECHO,))
    try:
        made.wait_up(2)
        with EnvClient(made.discovery) as client:
            client.create_episode(ECHO, seed=1)  # the client reads the map: both holders up
            for holder in made.holders():
                made.kill_holder(holder["holder"])
            assert all(h.state == "up" for h in client.cluster.router.map.values())  # a stale map
            created = client.create_episode(ECHO, seed=2)
            live = {h["holder"]: h for h in made.wait_up(1)}
            assert created.episode_id.partition(".")[0] in live
            assert wait_for(lambda: sum(h["live_episodes"] for h in made.holders()) == 1)
        local = gym.make(ECHO).unwrapped
        assert created.observation == local.reset(seed=2)[0]
    finally:
        made.stop()


@pytest.mark.parametrize("kind", KINDS)
def test_scale_up_takes_new_episodes_and_a_drained_holder_finishes_its_own(kind):
    made = ServedCluster(kind, 1, (ECHO,))
    cli = [sys.executable, "-m", "agentrl", "cluster"]
    try:
        (first,) = made.wait_up(1)
        with EnvClient(made.discovery) as client:
            old = [client.create_episode(ECHO, seed=i) for i in range(3)]
            added = subprocess.run([*cli, "add", "--url", made.url, "-n", "1"], capture_output=True,
                                   text=True, timeout=120)
            assert added.returncode == 0, added.stderr
            holders = made.wait_up(2)
            (second,) = [h for h in holders if h["holder"] != first["holder"]]
            drained = subprocess.run([*cli, "drain", "--url", made.url, first["holder"]], capture_output=True,
                                     text=True, timeout=120)
            assert drained.returncode == 0 and '"draining"' in drained.stdout, drained.stdout
            client.cluster.router.read_at = -1e9  # as after REFRESH_S: the next create reads the map
            new = [client.create_episode(ECHO, seed=i) for i in range(3)]
            assert {n.episode_id.partition(".")[0] for n in new} == {second["holder"]}
            for ep in old:  # the drained holder still answers its live episodes
                assert "hi" in client.step(ep.episode_id, '<tool_call>{"name": "echo", "arguments": '
                                           '{"text": "hi"}}</tool_call>').observation
            pid = made.holder_pid(first["holder"])
            for ep in old:
                client.close_episode(ep.episode_id)
            made.wait(lambda hs: next(h for h in hs if h["holder"] == first["holder"])["state"] == "down",
                      60, "the drained holder stopped")
            wait_for(lambda: not alive(pid), 30)
        bad = subprocess.run([*cli, "drain", "--url", made.url, "nobody"], capture_output=True, text=True,
                             timeout=120)
        assert bad.returncode == 1 and "no holder 'nobody'" in bad.stdout
    finally:
        made.stop()


def test_every_holder_starts_with_the_operators_settings_and_one_secret(monkeypatch):
    """What every holder is handed: the parent's agentrl settings (a Ray actor on another node would
    not inherit them), the cluster's secret (the operator's, else one drawn per cluster) and the
    token; nothing else of the parent's environment."""
    from agentrl.server.cluster.pool import holder_environment

    monkeypatch.setenv("AGENTRL_TASK_ID_KEY", "operator key")
    monkeypatch.setenv("UNRELATED_SETTING", "x")
    monkeypatch.delenv("AGENTRL_CLUSTER_SECRET", raising=False)
    drawn = holder_environment("t")
    assert drawn["AGENTRL_TASK_ID_KEY"] == "operator key" and drawn["AGENTRL_TOKEN"] == "t"
    assert len(drawn["AGENTRL_CLUSTER_SECRET"]) == 64 and "UNRELATED_SETTING" not in drawn
    assert holder_environment("t")["AGENTRL_CLUSTER_SECRET"] != drawn["AGENTRL_CLUSTER_SECRET"]
    monkeypatch.setenv("AGENTRL_CLUSTER_SECRET", "operator secret")
    assert holder_environment(None)["AGENTRL_CLUSTER_SECRET"] == "operator secret"


@pytest.mark.parametrize("kind", KINDS)
def test_every_holder_names_a_task_with_the_same_id(kind):
    """One secret per cluster, from which Flights-v0 derives its task-id key: the parent draws it
    once and hands it to every holder, a restarted one too, so a trainer's ledger of task ids sees
    one id per task behind one address (each holder process drawing its own would name seed 90001
    of the test split anew on each)."""
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTRL_TASK_ID_KEY", "AGENTRL_CLUSTER_SECRET")}
    made = ServedCluster(kind, 2, (FLIGHTS,), environ=env)
    try:
        holders = made.wait_up(2)

        def task_ids() -> list[str]:
            ids = []
            for holder in made.wait_up(2):
                with EnvClient(holder["url"]) as client:
                    created = client.create_episode(FLIGHTS, seed=90001, options={"split": "test"})
                    ids.append(created.info["task_id"])
                    client.close_episode(created.episode_id)
            return ids

        first = task_ids()
        assert len(first) == 2 and first[0] == first[1], first
        if kind == "processes":  # a holder started again after a crash keeps the cluster's key
            os.kill(made.holder_pid(holders[0]["holder"]), signal.SIGKILL)
            made.wait(lambda hs: any(h["state"] != "up" for h in hs), 30, "the lost holder reported")
            assert task_ids() == first
    finally:
        made.stop()
