"""Lifetimes and limits: idle TTL, max age, capacity, auth, graceful shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import pytest
from server_helpers import ECHO, call
from support import answers_after_idling

from agentrl.client import (
    CapacityError,
    EnvClient,
    InvalidRequestError,
    RemoteEnv,
    RetryPolicy,
    UnauthorizedError,
    UnknownEpisodeError,
)
from agentrl.echo import EchoEnv
from agentrl.server.cli import config_from_args
from agentrl.server.config import ServerConfig
from agentrl.server.local import free_port, serve_in_thread

NO_RETRY = RetryPolicy(retries=0)


def wait_until(predicate, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_idle_episodes_expire_and_active_ones_live_on():
    config = ServerConfig(idle_ttl_s=0.6, reap_interval_s=0.1)
    with serve_in_thread(config) as url, EnvClient(url) as client:
        idle = client.create_episode(ECHO, seed=0).episode_id
        busy = client.create_episode(ECHO, seed=0).episode_id
        for _ in range(6):  # keep one episode busy for ~1.2 s, twice the idle TTL
            client.step(busy, call("echo", text="x")) if client.episode_status(busy).turns < 7 else None
            time.sleep(0.2)
        with pytest.raises(UnknownEpisodeError):
            client.step(idle, "x")
        assert client.episode_status(busy).status == "running"
        assert wait_until(lambda: client.health()["live_episodes"] == 0)
        metrics = httpx.get(f"{url}/metrics").text
        assert 'agentrl_episodes_closed_total{reason="idle"} 2.0' in metrics


def test_episodes_older_than_max_age_are_closed():
    with serve_in_thread(ServerConfig(max_age_s=0.5, reap_interval_s=0.1)) as url, EnvClient(url) as client:
        eid = client.create_episode(ECHO).episode_id
        deadline = time.monotonic() + 10
        with pytest.raises(UnknownEpisodeError):  # stepping keeps it active, but age wins
            while time.monotonic() < deadline:
                client.reset_episode(eid)
                client.step(eid, call("echo", text="x"))
                time.sleep(0.05)


def test_capacity_limit_answers_429_with_retry_after():
    with serve_in_thread(ServerConfig(max_episodes=3)) as url, EnvClient(url, retry=NO_RETRY) as client:
        ids = [client.create_episode(ECHO).episode_id for _ in range(3)]
        r = httpx.post(f"{url}/v1/episodes", json={"env_id": ECHO})
        assert r.status_code == 429 and r.json()["error"] == "capacity"
        assert int(r.headers["Retry-After"]) >= 1
        with pytest.raises(CapacityError) as full:
            client.create_episode(ECHO)
        assert full.value.retry_after is not None and "3 live episodes" in full.value.message
        client.close_episode(ids[0])
        assert client.create_episode(ECHO).episode_id  # a freed slot is usable again


def test_client_retries_a_429_until_a_slot_frees():
    config = ServerConfig(max_episodes=1, idle_ttl_s=0.5, reap_interval_s=0.2)
    with serve_in_thread(config) as url, EnvClient(url, retry=RetryPolicy(retries=5)) as client:
        client.create_episode(ECHO)
        started = time.monotonic()
        assert client.create_episode(ECHO).episode_id  # waits for the reaper through Retry-After
        assert time.monotonic() - started >= 0.5


def test_bearer_token_is_required_when_set():
    with serve_in_thread(ServerConfig(token="s3cret")) as url:
        assert httpx.get(f"{url}/health").status_code == 200  # liveness stays open
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret"}):
            r = httpx.get(f"{url}/v1/envs", headers=headers)
            assert r.status_code == 401 and r.json()["error"] == "unauthorized"
        with pytest.raises(UnauthorizedError), EnvClient(url) as anonymous:
            anonymous.create_episode(ECHO)
        env = RemoteEnv(ECHO, base_url=url, token="s3cret")
        obs, info = env.reset(seed=1)
        assert info["secret"] and env.step(call("echo", text="x"))[0]
        env.close()


def test_token_is_mandatory_off_loopback(monkeypatch):
    monkeypatch.delenv("AGENTRL_TOKEN", raising=False)
    with pytest.raises(ValueError, match="requires a token"):
        ServerConfig(host="0.0.0.0").check()
    ServerConfig(host="0.0.0.0", token="t").check()
    monkeypatch.setenv("AGENTRL_TOKEN", "from-env")
    ServerConfig(host="0.0.0.0").check()
    assert ServerConfig().resolved_token() == "from-env"
    from agentrl.cli import build_parser

    monkeypatch.delenv("AGENTRL_TOKEN")
    args = build_parser().parse_args(["serve", "--host", "0.0.0.0", "--port", "1"])
    assert args.handler(args) == 2  # refused before binding anything
    assert config_from_args(args).host == "0.0.0.0"


def test_shutdown_closes_every_episode(monkeypatch):
    closed = []
    original = EchoEnv.close
    monkeypatch.setattr(EchoEnv, "close", lambda self: (closed.append(id(self)), original(self)))
    with serve_in_thread() as url, EnvClient(url) as client:
        for seed in range(5):
            eid = client.create_episode(ECHO, seed=seed).episode_id
            client.step(eid, call("echo", text="x"))
        before = len(closed)
    assert len(closed) - before == 5


def test_cli_server_stops_cleanly_on_sigterm():
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentrl", "serve", "--port", str(port), "--env", ECHO],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "AGENTRL_TOKEN": ""},
    )
    try:
        url = f"http://127.0.0.1:{port}"
        assert wait_until(lambda: _healthy(url), 30), "server did not come up"
        with EnvClient(url) as client:
            eids = [client.create_episode(ECHO).episode_id for _ in range(3)]
            assert client.health()["live_episodes"] == len(eids)
            assert [e.env_id for e in client.list_envs()] == [ECHO]  # --env limits what is served
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once done
        assert b"closed 3 episodes" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_an_idle_connection_outlives_a_clients_pool_expiry():
    """The server closes an idle connection only after its clients would have: one it closed as a
    client reused it would lose that request in flight."""
    with serve_in_thread() as url:
        assert answers_after_idling(url, "/health")


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_operator_kwargs_come_from_the_operator_not_from_clients():
    config = ServerConfig(env_kwargs={ECHO: {"max_turns": 1}, "agentrl/Search-v0": {"topk": 2}})
    with serve_in_thread(config) as url, EnvClient(url, retry=NO_RETRY) as client:
        # the operator's arguments apply: this Echo episode truncates after one turn
        episode = client.create_episode(ECHO, seed=0)
        assert client.step(episode.episode_id, call("echo", text="x")).truncated
        # a client may still set ordinary arguments on top
        longer = client.create_episode(ECHO, seed=0, env_kwargs={"max_turns": 3})
        assert not client.step(longer.episode_id, call("echo", text="x")).truncated
        # but not those that reach outside the episode (a server-side path, an endpoint)
        refused = ({"qa_path": "/etc/passwd"}, {"retrieval_url": "http://127.0.0.1:9"}, {"base_url": url})
        for kwargs in refused:
            with pytest.raises(InvalidRequestError, match="only the server's operator"):
                client.create_episode("agentrl/Search-v0", seed=0, env_kwargs=kwargs)


def test_cli_parses_env_kwargs_per_env_id():
    from agentrl.cli import build_parser

    args = build_parser().parse_args(
        ["serve", "--env-kwargs", 'agentrl/Bash-v0={"sandbox_url": "http://127.0.0.1:8090"}']
    )
    assert config_from_args(args).env_kwargs == {"agentrl/Bash-v0": {"sandbox_url": "http://127.0.0.1:8090"}}
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--env-kwargs", "agentrl/Bash-v0=[1]"])
