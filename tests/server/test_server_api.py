"""The episode API over real HTTP: the happy path, every kind of bad input, batching, idempotency."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from server_helpers import ECHO, call

from agentrl.client import (
    AsyncEnvClient,
    EnvClient,
    EpisodeOverError,
    InvalidRequestError,
    UnknownEnvError,
    UnknownEpisodeError,
)
from agentrl.core import EpisodeOverError as LocalEpisodeOverError
from agentrl.core import StepResult
from agentrl.protocol import EpisodeEndedError
from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread


@pytest.fixture()
def http(base_url):
    with httpx.Client(base_url=base_url, timeout=30) as client:
        yield client


def new_episode(http, seed=0, **extra):
    r = http.post("/v1/episodes", json={"env_id": ECHO, "seed": seed, **extra})
    assert r.status_code == 201, r.text
    return r.json()


def test_envs_lists_spaces_tools_and_defaults(http):
    envs = {e["env_id"]: e for e in http.get("/v1/envs").json()["envs"]}
    echo = envs[ECHO]
    assert echo["available"] is True
    assert echo["action_space"] == {"type": "text", "max_length": 65536, "min_length": 0}
    assert [t["function"]["name"] for t in echo["tools"]] == ["echo", "finish"]
    assert echo["default_options"]["max_turns"] == 8
    for env in envs.values():  # an env that cannot be built here says why instead of failing the list
        assert env["available"] or env["reason"]
    assert http.get(f"/v1/envs/{ECHO}").json() == echo


def test_episode_lifecycle(http):
    first = new_episode(http, seed=5)
    eid = first["episode_id"]
    assert first["env_id"] == ECHO and "finish" in first["observation"]
    r = http.post(f"/v1/episodes/{eid}/step", json={"action": call("echo", text="hi")})
    assert r.status_code == 200
    out = r.json()
    assert set(out) == {"observation", "reward", "terminated", "truncated", "info"}
    assert '"content": "hi"' in out["observation"] and out["info"]["calls"] == [{"name": "echo", "ok": True}]
    status = http.get(f"/v1/episodes/{eid}").json()
    assert status["status"] == "running" and status["turns"] == 1 and status["seed"] == 5
    done = http.post(f"/v1/episodes/{eid}/step",
                     json={"action": call("finish", answer=first["info"]["secret"])}).json()
    assert done["terminated"] and done["reward"] == 1.0
    assert http.get(f"/v1/episodes/{eid}").json()["status"] == "done"
    after = http.post(f"/v1/episodes/{eid}/step", json={"action": "more"})
    assert after.status_code == 409 and after.json()["error"] == "episode_over"
    assert http.delete(f"/v1/episodes/{eid}").json() == {"episode_id": eid, "closed": True}
    assert http.get(f"/v1/episodes/{eid}").status_code == 404
    assert http.delete(f"/v1/episodes/{eid}").status_code == 404
    # closed, not unknown: a cluster client replays an unknown episode, never a closed one
    assert http.get(f"/v1/episodes/{eid}").json()["error"] == "episode_closed"


def test_an_expired_episode_says_so_and_stays_closed():
    """The server closes an idle episode; a later call is told it expired, distinctly from an
    unknown id, and the client raises `EpisodeEndedError` (which is an `UnknownEpisodeError`)."""
    config = ServerConfig(env_ids=(ECHO,), idle_ttl_s=0.2, reap_interval_s=0.1, ui=False)
    with serve_in_thread(config) as url, EnvClient(url) as client:
        made = client.create_episode(ECHO, seed=2)
        deadline = time.monotonic() + 30
        while client.health().get("live_episodes", 1) and time.monotonic() < deadline:
            time.sleep(0.1)
        with pytest.raises(EpisodeEndedError) as expired:
            client.step(made.episode_id, "x")
        assert expired.value.code == "episode_expired" and "idle" in expired.value.message
        assert isinstance(expired.value, UnknownEpisodeError)
        with pytest.raises(UnknownEpisodeError) as unknown:
            client.step(made.episode_id + "x", "x")
        assert unknown.value.code == "unknown_episode"


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("post", "/v1/episodes", {"env_id": "agentrl/Nope-v0"}, 404, "unknown_env"),
        ("post", "/v1/episodes", {"env_id": ECHO, "seed": "x"}, 422, "invalid_request"),
        ("post", "/v1/episodes", {"env_id": ECHO, "seed": -1}, 422, "invalid_request"),
        ("post", "/v1/episodes", {"env_id": ECHO, "bogus": 1}, 422, "invalid_request"),
        ("post", "/v1/episodes", {"env_id": ECHO, "env_kwargs": {"max_turns": 0}}, 400, "env_rejected"),
        ("post", "/v1/episodes", {"env_id": ECHO, "env_kwargs": {"nope": 1}}, 400, "env_rejected"),
        ("post", "/v1/episodes", {"env_id": ECHO, "env_kwargs": {"base_url": "x"}}, 400, "env_rejected"),
        ("post", "/v1/episodes", [1, 2], 422, "invalid_request"),
        ("post", "/v1/episodes/nope/step", {"action": "x"}, 404, "unknown_episode"),
        ("get", "/v1/episodes/nope", None, 404, "unknown_episode"),
        ("get", "/v1/nothing-here", None, 404, "not_found"),
        ("post", "/v1/step", {"steps": "x"}, 422, "invalid_request"),
    ],
)
def test_bad_input_is_a_clear_4xx(http, method, path, body, status, code):
    r = http.request(method, path, json=body)
    assert r.status_code == status, r.text
    assert r.json()["error"] == code and r.json()["message"]


def test_malformed_json_and_wrong_types(http):
    eid = new_episode(http)["episode_id"]
    r = http.post(f"/v1/episodes/{eid}/step", content=b'{"action": ',
                  headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["error"] == "invalid_request"
    r = http.post(f"/v1/episodes/{eid}/step", json={"action": 12})
    assert r.status_code == 422 and "action" in r.json()["message"]
    assert http.get(f"/v1/episodes/{eid}").json()["turns"] == 0  # nothing was stepped


def test_oversized_action_and_body_are_refused(http):
    eid = new_episode(http)["episode_id"]
    r = http.post(f"/v1/episodes/{eid}/step", json={"action": "x" * 70_000})
    assert r.status_code == 413 and r.json()["error"] == "action_too_large"
    r = http.post(f"/v1/episodes/{eid}/step", json={"action": "x" * (17 * 1024 * 1024)})
    assert r.status_code == 413 and r.json()["error"] == "body_too_large"
    assert http.get(f"/v1/episodes/{eid}").json()["turns"] == 0


def test_batched_step_keeps_order_and_isolates_errors(http):
    a, b = new_episode(http, seed=1)["episode_id"], new_episode(http, seed=2)["episode_id"]
    steps = [
        {"episode_id": a, "action": call("echo", text="one")},
        {"episode_id": "missing", "action": "x"},
        {"episode_id": b, "action": call("echo", text="two")},
        {"episode_id": a, "action": call("echo", text="three")},
    ]
    results = http.post("/v1/step", json={"steps": steps}).json()["results"]
    assert [r["episode_id"] for r in results] == [a, "missing", b, a]
    assert [r["status"] for r in results] == [200, 404, 200, 200]
    assert '"one"' in results[0]["result"]["observation"] and '"three"' in results[3]["result"]["observation"]
    assert results[0]["result"]["info"]["turn"] == 1 and results[3]["result"]["info"]["turn"] == 2
    assert results[1]["error"]["error"] == "unknown_episode" and results[1]["result"] is None


def test_request_id_makes_a_retried_step_idempotent(http):
    eid = new_episode(http)["episode_id"]
    body = {"action": call("echo", text="once"), "request_id": "step-1"}
    first = http.post(f"/v1/episodes/{eid}/step", json=body).json()
    again = http.post(f"/v1/episodes/{eid}/step", json=body).json()
    assert first == again
    assert http.get(f"/v1/episodes/{eid}").json()["turns"] == 1
    other = http.post(f"/v1/episodes/{eid}/step", json={**body, "request_id": "step-2"}).json()
    assert other["info"]["turn"] == 2


def test_concurrent_retries_of_one_request_step_once(base_url):
    async def main():
        async with AsyncEnvClient(base_url) as client:
            created = await client.create_episode(ECHO, seed=0)
            eid = created.episode_id
            same = [client.step(eid, call("echo", text="x"), request_id="same") for _ in range(8)]
            results = await asyncio.gather(*same)
            status = await client.episode_status(created.episode_id)
            return results, status

    results, status = asyncio.run(main())
    assert all(r == results[0] for r in results)
    assert status.turns == 1


def test_retried_create_returns_the_same_episode(http):
    body = {"env_id": ECHO, "seed": 9, "request_id": "create-1"}
    assert http.post("/v1/episodes", json=body).json() == http.post("/v1/episodes", json=body).json()


def test_sync_client_raises_typed_errors_with_the_servers_message(base_url):
    with EnvClient(base_url) as client:
        with pytest.raises(UnknownEnvError, match="Nope-v0"):
            client.create_episode("agentrl/Nope-v0")
        with pytest.raises(UnknownEpisodeError, match="never created here") as unknown:
            client.step("missing", "x")
        assert unknown.value.code == "unknown_episode" and not isinstance(unknown.value, EpisodeEndedError)
        with pytest.raises(InvalidRequestError) as bad:
            client.create_episode(ECHO, env_kwargs={"max_turns": 0})
        assert bad.value.status == 400 and "max_turns" in bad.value.message
        created = client.create_episode(ECHO, seed=1, env_kwargs={"max_turns": 1})
        result = client.step(created.episode_id, "no call")
        assert isinstance(result, StepResult) and result.truncated
        with pytest.raises(EpisodeOverError) as over:
            client.step(created.episode_id, "again")
        assert isinstance(over.value, LocalEpisodeOverError) and over.value.status == 409
        batch = client.step_batch([(created.episode_id, "x"), ("missing", "y")])
        assert isinstance(batch[0], EpisodeOverError) and isinstance(batch[1], UnknownEpisodeError)
        assert client.close_episode(created.episode_id) is True


def test_metrics_count_episodes_steps_and_errors(http):
    eid = new_episode(http)["episode_id"]
    http.post(f"/v1/episodes/{eid}/step", json={"action": "x"})
    http.post("/v1/episodes/nope/step", json={"action": "x"})
    text = http.get("/metrics").text
    assert "agentrl_live_episodes " in text
    assert 'agentrl_steps_total{env_id="agentrl/Echo-v0"}' in text
    assert 'agentrl_step_seconds_bucket{env_id="agentrl/Echo-v0",le="0.001"}' in text
    assert 'agentrl_errors_total{code="unknown_episode"}' in text
    assert http.get("/health").json()["status"] == "healthy"


def test_client_retries_a_lost_response_without_stepping_twice(base_url, monkeypatch):
    """The network drops the first answer to each call on the channel (the create, then each step);
    the retry carries the same request_id."""
    import agentrl.client.steps as steps

    real_request = steps._SyncConnection.request
    answered: list[bytes] = []

    def flaky(self, payload):
        reply = real_request(self, payload)  # the server has stepped and answered
        answered.append(reply)
        if len(answered) % 2 == 1:
            raise steps.ConnectionLost("dropped")  # ... and the answer is lost on the way
        return reply

    monkeypatch.setattr(steps._SyncConnection, "request", flaky)
    with EnvClient(base_url) as client:
        eid = client.create_episode(ECHO, seed=0).episode_id
        results = [client.step(eid, call("echo", text=str(i))) for i in range(3)]
        assert [r.info["turn"] for r in results] == [1, 2, 3]
        assert client.episode_status(eid).turns == 3
    assert len(answered) == 8 and answered[0::2] == answered[1::2]  # each retry got the same answer
