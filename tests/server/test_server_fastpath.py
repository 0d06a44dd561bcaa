"""The step endpoints' fast path answers as the FastAPI routes do; the clients' URL joining."""

from __future__ import annotations

import json

import httpx
import pytest
from server_helpers import ECHO, call

from agentrl.client.wire import _url


@pytest.fixture()
def http(base_url):
    with httpx.Client(base_url=base_url, timeout=30) as client:
        yield client


def _post(http, path, body, fast: bool):
    # `application/json` takes the fast path; FastAPI's route answers other JSON types (`+json`)
    kind = "application/json" if fast else "application/vnd.agentrl+json"
    return http.post(path, content=json.dumps(body).encode(), headers={"content-type": kind})


def _episode(http, seed):
    return http.post("/v1/episodes", json={"env_id": ECHO, "seed": seed}).json()["episode_id"]


@pytest.mark.parametrize("body", [
    {"action": call("echo", text="hi")},
    {"action": call("echo", text="hi"), "request_id": "r-1"},
    {"action": 12},
    {"action": "x", "bogus": 1},
    {},
    [1, 2],
])
def test_fast_path_and_route_agree_on_single_steps(http, body):
    fast, slow = _episode(http, 3), _episode(http, 3)
    a = _post(http, f"/v1/episodes/{fast}/step", body, fast=True)
    b = _post(http, f"/v1/episodes/{slow}/step", body, fast=False)
    assert (a.status_code, a.json()) == (b.status_code, b.json())
    assert a.headers["content-type"] == b.headers["content-type"] == "application/json"


def test_fast_path_and_route_agree_on_batches_and_errors(http):
    ids = [_episode(http, 4), _episode(http, 4)]
    for episode_id in ids:  # the same steps through each path, so both episodes stay alike
        steps = [{"episode_id": episode_id, "action": call("echo", text="a")},
                 {"episode_id": "nope", "action": "x"}]
        a = _post(http, "/v1/step", {"steps": steps}, fast=episode_id == ids[0])
        assert a.status_code == 200
        results = a.json()["results"]
        assert [r["status"] for r in results] == [200, 404]
        results[0].pop("episode_id")
        if episode_id == ids[0]:
            first = results
        else:
            assert results == first
    a = _post(http, "/v1/episodes/nope/step", {"action": "x"}, fast=True)
    b = _post(http, "/v1/episodes/nope/step", {"action": "x"}, fast=False)
    assert (a.status_code, a.json()) == (b.status_code, b.json()) and a.status_code == 404


@pytest.mark.parametrize("base", ["http://127.0.0.1:8000", "http://h:1/prefix", "http://h:1/prefix/"])
@pytest.mark.parametrize("path", ["/health", f"/v1/envs/{ECHO}", "/v1/episodes/a b%2F/step"])
def test_client_urls_join_as_httpx_joins_them(base, path):
    with httpx.Client(base_url=base) as http:
        assert http.build_request("GET", _url(http, path)).url == http.build_request("GET", path).url
