"""What a server remembers of ended episodes, and whom it tells: an ended episode stays ended across a
restart of its server (its memory is a file in the state directory), is told as ended to its own
client only, and a create's request id and a client key belong to one client alone.

Real servers on loopback ports, as every server test starts them (`serve_in_thread`)."""

from __future__ import annotations

import json
import sqlite3
import time

import httpx
import pytest
from server_helpers import ECHO
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from agentrl.client import EnvClient
from agentrl.protocol import CLIENT_KEY_HEADER
from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread

TOKEN, OPERATOR = "memory-token", "memory-operator"


def headers(key: str | None = None, token: str | None = TOKEN) -> dict[str, str]:
    made = {"Authorization": f"Bearer {token}"} if token else {}
    if key is not None:
        made[CLIENT_KEY_HEADER] = key
    return made


def step_error(url: str, episode_id: str, key: str | None, token: str | None = TOKEN) -> str:
    """The error code a step of `episode_id` is answered with, sent with client key `key`."""
    answer = httpx.post(f"{url}/v1/episodes/{episode_id}/step", json={"action": "x"},
                        headers=headers(key, token))
    assert answer.status_code == 404, answer.text
    return answer.json()["error"]


def create(url: str, key: str, **body) -> dict:
    answer = httpx.post(f"{url}/v1/episodes", json={"env_id": ECHO, **body}, headers=headers(key))
    assert answer.status_code == 201, answer.text
    return answer.json()


@pytest.fixture(scope="module")
def url():
    with serve_in_thread(ServerConfig(token=TOKEN, operator_token=OPERATOR, env_ids=(ECHO,), ui=False,
                                      idle_ttl_s=120.0, max_age_s=900.0)) as base:
        yield base


def test_a_create_answers_the_servers_ttls(url):
    made = create(url, "ttl-client", seed=1)
    assert (made["idle_ttl_s"], made["max_age_s"]) == (120.0, 900.0)
    with EnvClient(url, token=TOKEN) as client:
        fork = client.fork_episode(client.create_episode(ECHO, seed=2).episode_id)[0]
        assert (fork.idle_ttl_s, fork.max_age_s) == (120.0, 900.0)


def test_an_ended_episode_is_unknown_to_every_caller_but_its_client(url):
    made = create(url, "owner-key", seed=3)["episode_id"]
    closed = httpx.delete(f"{url}/v1/episodes/{made}", headers=headers("owner-key"))
    assert closed.status_code == 200, closed.text
    assert step_error(url, made, "owner-key") == "episode_closed"
    assert step_error(url, made, None, OPERATOR) == "episode_closed"  # the operator reaches it
    assert step_error(url, made, "other-key") == "unknown_episode"  # not told that it existed
    assert step_error(url, made, None) == "unknown_episode"
    status = httpx.get(f"{url}/v1/episodes/{made}", headers=headers("other-key"))
    assert status.json()["error"] == "unknown_episode"


def test_a_create_request_id_belongs_to_its_client(url):
    first = create(url, "client-a", seed=4, request_id="same-id")
    assert create(url, "client-a", seed=4, request_id="same-id") == first  # a retry: the same episode
    theirs = create(url, "client-b", seed=5, request_id="same-id")
    assert theirs["episode_id"] != first["episode_id"]
    # over the step channel too: another client's create with the id is a create of its own
    with connect(url.replace("http://", "ws://") + "/v1/ws", additional_headers=headers("client-c"),
                 compression=None, proxy=None) as ws:
        ws.send(json.dumps({"id": 1, "steps": [
            {"op": "create", "env_id": ECHO, "seed": 6, "request_id": "same-id"}]}).encode())
        (item,) = json.loads(ws.recv(timeout=30))["results"]
    assert item["status"] == 201 and item["episode_id"] not in (first["episode_id"], theirs["episode_id"])
    assert step_error(url, first["episode_id"], "client-b") == "unknown_episode"


def test_a_client_key_is_checked_whole_never_cut(url):
    long_a, long_b = "k" * 128 + "a", "k" * 128 + "b"  # the same first 128 characters
    for key in (long_a, long_b, "with space", "", "ключ"):
        answer = httpx.post(f"{url}/v1/episodes", json={"env_id": ECHO},
                            headers={**headers(), CLIENT_KEY_HEADER: key.encode()})
        assert answer.status_code == 400, (key, answer.text)
        assert answer.json()["error"] == "invalid_request" and "128" in answer.json()["message"]
    with pytest.raises(InvalidStatus) as refused:
        connect(url.replace("http://", "ws://") + "/v1/ws", additional_headers=headers(long_a),
                compression=None, proxy=None)
    assert refused.value.response.status_code == 400
    assert create(url, "k" * 128)["episode_id"]  # the longest key there is
    with pytest.raises(ValueError, match="client key"):
        EnvClient(url, token=TOKEN, client_key=long_a)


def test_ended_episodes_are_remembered_across_a_restart_within_the_memory(tmp_path):
    config = ServerConfig(token=TOKEN, operator_token=OPERATOR, env_ids=(ECHO,), ui=False, holder="keeper",
                          state_dir=str(tmp_path), ended_memory=2, idle_ttl_s=1.0, reap_interval_s=0.05)
    with serve_in_thread(config) as url, EnvClient(url, token=TOKEN) as owner:
        ids = []
        for seed in range(3):  # the operator closes three; the memory holds two
            ids.append(owner.create_episode(ECHO, seed=seed).episode_id)
            answer = httpx.delete(f"{url}/v1/episodes/{ids[-1]}", headers=headers(None, OPERATOR))
            assert answer.status_code == 200, answer.text
        assert [step_error(url, eid, owner.client_key) for eid in ids] == \
            ["unknown_episode", "episode_closed", "episode_closed"]  # the oldest forgotten
        ids.append(owner.create_episode(ECHO, seed=3).episode_id)
        deadline = time.monotonic() + 30
        while httpx.get(f"{url}/health").json()["live_episodes"]:  # the fourth expires
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # an expired one is forgotten before a closed one: a cluster client's clocks tell it
        assert step_error(url, ids[3], owner.client_key) == "unknown_episode"
        client_key = owner.client_key
    with sqlite3.connect(tmp_path / "keeper.ended.sqlite3") as db:  # a file per holder name
        assert db.execute("SELECT count(*) FROM ended").fetchone() == (2,)
    with serve_in_thread(config) as url:  # the same holder, restarted: it still knows what it ended
        assert [step_error(url, eid, client_key) for eid in ids[1:3]] == ["episode_closed"] * 2
        assert step_error(url, ids[1], "someone-else") == "unknown_episode"


def test_without_a_state_dir_a_restart_forgets():
    """The memory outlives the process only in a file: what the test above would see without one."""
    config = ServerConfig(env_ids=(ECHO,), ui=False, holder="forgetter")
    with serve_in_thread(config) as url, EnvClient(url) as owner:
        eid = owner.create_episode(ECHO, seed=1).episode_id
        owner.close_episode(eid)
        assert step_error(url, eid, owner.client_key, None) == "episode_closed"
    with serve_in_thread(config) as url:
        assert step_error(url, eid, None, None) == "unknown_episode"



def test_the_memory_file_keeps_the_newest_within_its_bound_and_forgets_the_old(tmp_path):
    """A memory reopened smaller keeps its newest, and one past its `forget_at` is let go, on disk too."""
    from agentrl.server.ended import Ended, EndedEpisodes

    path = tmp_path / "h.ended.sqlite3"
    first = EndedEpisodes(3, path)
    now = time.time()
    for i, reason in enumerate(("client", "idle", "client")):
        first.add(f"h.{i}", Ended(reason, None, now + (1 if i == 0 else 3600)))
    first.close()
    smaller = EndedEpisodes(2, path)
    assert (smaller.get("h.0"), smaller.get("h.1")) == (Ended("client", None, now + 1), None)  # expired first
    assert smaller.get("h.2") is not None and smaller.forget_old(now + 2) == 1 and smaller.get("h.0") is None
    smaller.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT episode_id FROM ended").fetchall() == [("h.2",)]
