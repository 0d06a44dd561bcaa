"""An episode is reachable only by the client that made it, or by the operator.

Every agentrl client sends a random client key; the server records it with each episode it makes
and answers any other caller as if the episode did not exist, so one client holding the shared token
can neither drive, read, fork nor close another's episode, nor find it in `GET /v1/episodes`
(`agentrl.server.owners`)."""

from __future__ import annotations

import json

import httpx
import pytest
from server_helpers import ECHO, call
from websockets.sync.client import connect

from agentrl.client import EnvClient, UnknownEpisodeError
from agentrl.protocol import CLIENT_KEY_HEADER
from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread

TOKEN, OPERATOR = "shared-token", "operator-token"


@pytest.fixture(scope="module")
def url():
    with serve_in_thread(ServerConfig(token=TOKEN, operator_token=OPERATOR, ui=False)) as base:
        yield base


def listed(url: str, **headers: str) -> set[str]:
    answer = httpx.get(f"{url}/v1/episodes", headers=headers)
    assert answer.status_code == 200, answer.text
    return {e["episode_id"] for e in answer.json()["episodes"]}


def test_another_client_can_neither_drive_read_fork_nor_close_an_episode(url):
    with EnvClient(url, token=TOKEN) as owner, EnvClient(url, token=TOKEN) as other:
        made = owner.create_episode(ECHO, seed=1)
        eid = made.episode_id
        for attempt in (lambda: other.step(eid, call("echo", text="x")), lambda: other.episode_status(eid),
                        lambda: other.fork_episode(eid), lambda: other.trajectory(eid),
                        lambda: other.reset_episode(eid, seed=2), lambda: other.render(eid),
                        lambda: other.close_episode(eid)):
            with pytest.raises(UnknownEpisodeError) as refused:
                attempt()
            assert refused.value.code == "unknown_episode"  # not told that it exists
        as_other = {"Authorization": f"Bearer {TOKEN}", CLIENT_KEY_HEADER: other.client_key}
        transcript = httpx.get(f"{url}/v1/episodes/{eid}/transcript", headers=as_other)
        assert transcript.status_code == 404
        batch = other.step_batch([(eid, call("echo", text="y"))])
        assert isinstance(batch[0], UnknownEpisodeError)
        # the owner's episode went on untouched: its first step is turn 1
        assert owner.step(eid, call("echo", text="mine")).info["turn"] == 1
        fork = owner.fork_episode(eid)[0]
        assert owner.step(fork.episode_id, call("echo", text="fork")).info["turn"] == 2
        with pytest.raises(UnknownEpisodeError):  # a fork belongs to its parent's client
            other.step(fork.episode_id, call("echo", text="x"))
        assert owner.close_episode(eid) is True and owner.close_episode(fork.episode_id) is True


def test_the_episode_list_shows_the_callers_own_and_the_operator_sees_all(url):
    with EnvClient(url, token=TOKEN) as a, EnvClient(url, token=TOKEN) as b:
        mine = a.create_episode(ECHO, seed=3).episode_id
        theirs = b.create_episode(ECHO, seed=4).episode_id
        keyless = httpx.post(f"{url}/v1/episodes", json={"env_id": ECHO, "seed": 5},
                             headers={"Authorization": f"Bearer {TOKEN}"}).json()["episode_id"]
        auth = f"Bearer {TOKEN}"
        seen_by_a = listed(url, Authorization=auth, **{CLIENT_KEY_HEADER: a.client_key})
        assert mine in seen_by_a and theirs not in seen_by_a and keyless not in seen_by_a
        assert listed(url, Authorization=auth) >= {keyless} and mine not in listed(url, Authorization=auth)
        assert {mine, theirs, keyless} <= listed(url, Authorization=f"Bearer {OPERATOR}")
        # the operator reaches any episode; a keyless one is reachable by every caller with the token
        stepped = httpx.post(f"{url}/v1/episodes/{mine}/step", json={"action": call("echo", text="op")},
                             headers={"Authorization": f"Bearer {OPERATOR}"})
        assert stepped.status_code == 200 and stepped.json()["info"]["turn"] == 1
        assert b.step(keyless, call("echo", text="anyone")).info["turn"] == 1
        keyless_step = httpx.post(f"{url}/v1/episodes/{mine}/step", json={"action": "x"},
                                  headers={"Authorization": auth})
        assert keyless_step.status_code == 404 and keyless_step.json()["error"] == "unknown_episode"


def test_a_client_given_the_same_key_shares_the_episodes(url):
    """Processes of one rollout system can share episodes by sharing their key."""
    with EnvClient(url, token=TOKEN) as first, \
            EnvClient(url, token=TOKEN, client_key=first.client_key) as second:
        made = first.create_episode(ECHO, seed=6)
        assert second.step(made.episode_id, call("echo", text="shared")).info["turn"] == 1


def test_frames_on_another_clients_socket_reach_nothing(url):
    with EnvClient(url, token=TOKEN) as owner:
        eid = owner.create_episode(ECHO, seed=7).episode_id
        headers = {"Authorization": f"Bearer {TOKEN}", CLIENT_KEY_HEADER: "someone-else"}
        with connect(url.replace("http://", "ws://") + "/v1/ws", additional_headers=headers,
                     compression=None, proxy=None) as ws:
            ws.send(json.dumps({"id": 1, "steps": [
                {"episode_id": eid, "action": call("echo", text="x")},
                {"op": "reset", "episode_id": eid, "seed": 1},
                {"op": "close", "episode_id": eid},
                {"op": "fork", "episode_id": eid, "n": 1}]}).encode())
            results = json.loads(ws.recv(timeout=30))["results"]
        assert [r["status"] for r in results] == [404, 404, 404, 404], results
        assert owner.step(eid, call("echo", text="still mine")).info["turn"] == 1


def test_a_server_without_a_token_enforces_no_key():
    """No token, no authentication (a loopback server): every caller operates it, so a client may
    step an episode another client made, as on every open loopback server before keys."""
    with serve_in_thread(ServerConfig(ui=False)) as open_url, EnvClient(open_url) as a, \
            EnvClient(open_url) as b:
        made = a.create_episode(ECHO, seed=8)
        assert b.step(made.episode_id, call("echo", text="open")).info["turn"] == 1
        assert made.episode_id in listed(open_url, **{CLIENT_KEY_HEADER: b.client_key})
