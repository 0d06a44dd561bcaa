"""The page's server side over real HTTP, without a browser: sign-in, the flag, watching routes, escaping."""

from __future__ import annotations

import json

import httpx
import pytest
from ui_helpers import ECHO, FLIGHTS, TOKEN, served

import agentrl.server.transcript as transcript_module
from agentrl.cli import build_parser
from agentrl.core import tool_call as call
from agentrl.server.cli import config_from_args
from agentrl.server.local import serve_in_thread
from agentrl.server.transcript import WatchTranscript
from agentrl.server.ui.render import text_html, tool_forms


@pytest.fixture()
def http(base_url):
    with httpx.Client(base_url=base_url, timeout=30) as client:
        yield client


def test_the_page_is_on_by_default_and_off_with_the_flag():
    assert config_from_args(build_parser().parse_args(["serve"])).ui is True
    assert config_from_args(build_parser().parse_args(["serve", "--no-ui"])).ui is False
    with serve_in_thread(served(ui=False)) as url, httpx.Client(base_url=url) as http:
        off = http.get("/ui")
        assert off.status_code == 404 and off.json()["error"] == "not_found"
        assert http.get("/ui/static/ui.js").status_code == 404
        assert http.get("/v1/episodes").status_code == 200  # watching through the API stays


def test_a_token_guards_the_page_and_the_cookie_only_serves_the_page(token_url):
    with httpx.Client(base_url=token_url, follow_redirects=False) as http:
        refused = http.get("/ui/episodes/x?y=1")
        assert refused.status_code == 303
        assert refused.headers["location"] == "/ui/login?next=%2Fui%2Fepisodes%2Fx%3Fy%3D1"
        assert http.get("/ui/static/ui.js").status_code == 303
        assert http.get("/v1/episodes").status_code == 401
        wrong = http.post("/ui/login", data={"token": "nope", "next": "/ui"})
        assert wrong.status_code == 401 and "wrong token" in wrong.text and "set-cookie" not in wrong.headers
        for evil in ("https://elsewhere.example/", "//elsewhere.example/ui", "/uiother", "/ui//x"):
            moved = http.post("/ui/login", data={"token": TOKEN, "next": evil})
            assert moved.status_code == 303 and moved.headers["location"] == "/ui", evil
        cookie = moved.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert http.get("/ui").status_code == 200  # the client kept the cookie
        assert http.get("/ui/static/ui.js").status_code == 200
        body = {"env_id": ECHO, "seed": 0}
        assert http.post("/v1/episodes", json=body).status_code == 401  # the cookie alone cannot act
        assert http.get("/v1/episodes").status_code == 401
        page = {"X-Agentrl-Page": "1"}
        assert http.post("/v1/episodes", json=body, headers=page).status_code == 201
        http.cookies.set("agentrl_page_token", "forged")
        assert http.post("/v1/episodes", json=body, headers=page).status_code == 401
        assert http.get("/ui").status_code == 303
    with httpx.Client(base_url=token_url, headers={"Authorization": f"Bearer {TOKEN}"}) as scripted:
        assert scripted.get("/ui").status_code == 200  # the bearer header works for the page too


def test_the_list_and_the_transcript_follow_an_episode_through_reset_and_close(http):
    first = http.post("/v1/episodes", json={"env_id": ECHO, "seed": 3}).json()
    eid = first["episode_id"]
    results = [http.post(f"/v1/episodes/{eid}/step", json={"action": call("echo", text=t)}).json()
               for t in ("a", "b", "c")]
    listed = {e["episode_id"]: e for e in http.get("/v1/episodes").json()["episodes"]}[eid]
    assert (listed["status"], listed["steps"], listed["last_reward"]) == ("running", 3, 0.0)
    assert listed["seed"] == 3
    whole = http.get(f"/v1/episodes/{eid}/transcript").json()
    assert whole["first"] == {"observation": first["observation"], "info": first["info"]}
    assert [s["result"] for s in whole["steps"]] == results  # the very bytes each step answered
    assert [s["action"] for s in whole["steps"]] == [call("echo", text=t) for t in "abc"]
    tail = http.get(f"/v1/episodes/{eid}/transcript", params={"start": 2}).json()["steps"]
    assert [s["index"] for s in tail] == [2]
    assert http.get(f"/v1/episodes/{eid}/transcript", params={"start": 9}).json()["steps"] == []

    again = http.post(f"/v1/episodes/{eid}/reset", json={"seed": 4}).json()
    restarted = http.get(f"/v1/episodes/{eid}/transcript").json()
    assert restarted["first"]["observation"] == again["observation"] and restarted["steps"] == []
    finish = call("finish", answer=again["info"]["secret"])
    done = http.post(f"/v1/episodes/{eid}/step", json={"action": finish})
    assert done.json()["reward"] == 1.0
    http.delete(f"/v1/episodes/{eid}")
    closed = http.get(f"/v1/episodes/{eid}/transcript").json()  # still readable once closed
    assert closed["episode"]["status"] == "closed" and closed["episode"]["return"] == 1.0
    assert len(closed["steps"]) == 1 and closed["steps"][0]["result"]["terminated"]
    listed = {e["episode_id"]: e for e in http.get("/v1/episodes").json()["episodes"]}
    assert listed[eid]["status"] == "closed"
    assert http.get(f"/ui/episodes/{eid}").status_code == 200


@pytest.mark.parametrize(("path", "status", "code"), [
    ("/v1/episodes/nope/transcript", 404, "unknown_episode"),
    ("/ui/episodes/nope", 404, "unknown_episode"),
    ("/ui/episodes/nope/entries", 404, "unknown_episode"),
    ("/v1/episodes/nope/transcript?start=-1", 422, "invalid_request"),
    ("/v1/episodes/nope/transcript?start=x", 422, "invalid_request"),
])
def test_bad_requests_get_the_apis_errors(http, path, status, code):
    r = http.get(path)
    assert r.status_code == status and r.json()["error"] == code and r.json()["message"]


def test_env_text_cannot_inject_markup_into_the_page(http):
    eid = http.post("/v1/episodes", json={"env_id": ECHO, "seed": 0}).json()["episode_id"]
    evil = '<script>alert(1)</script><img src=x onerror=alert(2)> [x](javascript:alert(3))'
    http.post(f"/v1/episodes/{eid}/step", json={"action": call("echo", text=evil)})
    http.post(f"/v1/episodes/{eid}/step", json={"action": evil})
    for path in (f"/ui/episodes/{eid}", f"/ui/episodes/{eid}/play"):
        html = http.get(path).text
        assert "<script>alert" not in html and "<img src=x" not in html and 'href="javascript:' not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    fragment = http.get(f"/ui/episodes/{eid}/entries", params={"start": 1}).json()["html"]
    assert "<script>alert" not in fragment and "&lt;script&gt;" in fragment


def test_tool_results_read_as_tables_and_prose_naming_the_tags_stays_text():
    content = {"results": [{"id": 1, "to": "PEK"}]}
    result = f"<tool_response>\n{json.dumps({'name': 'search', 'content': content})}\n</tool_response>"
    html = text_html("# Found\n" + result)
    assert "<h1>Found</h1>" in html and 'class="records"' in html and "<td>PEK</td>" in html
    prose = text_html("Call a tool as <tool_call>{...}</tool_call>.")
    assert "&lt;tool_call&gt;{...}&lt;/tool_call&gt;" in prose and "tool_call\"" not in prose
    error = text_html('<tool_response>{"name": "book", "error": "no seats left"}</tool_response>')
    assert 'class="tool_response error"' in error and "no seats left" in error


def test_forms_follow_the_tool_schemas(http):
    tools = http.post("/v1/episodes", json={"env_id": FLIGHTS, "seed": 0}).json()["info"]["tools"]
    forms = {f.name: {x.name: x for x in f.fields} for f in tool_forms(tools)}
    assert list(forms) == [t["function"]["name"] for t in tools]
    book = forms["book_flight"]
    assert (book["flight_id"].kind, book["flight_id"].required) == ("integer", True)
    assert (book["cabin"].kind, book["cabin"].choices) == ("enum", ["economy", "business"])
    assert (book["passenger_ids"].kind, book["passenger_ids"].item) == ("list", "string")
    assert (book["seat_preference"].kind, book["seat_preference"].required) == ("enum", False)
    assert (forms["filter_flights"]["max_price"].kind, forms["filter_flights"]["max_price"].required) \
        == ("integer", False)
    assert forms["filter_flights"]["depart_after"].default == "00:00"
    assert tool_forms([{"nonsense": 1}, "x", {"function": {"name": "bare"}}])[0].fields == []


def test_a_transcript_keeps_its_byte_budget_and_counts_what_it_let_go(monkeypatch):
    monkeypatch.setattr(transcript_module, "MAX_TRANSCRIPT_BYTES", 1000)
    t = WatchTranscript()
    t.begin({"observation": "start", "info": {}})
    for i in range(50):
        t.record(f"action {i}", float(i), b'{"observation":"' + b"x" * 80 + b'"}')
    assert t.count == 50 and t.dropped > 0 and t.size <= 1000
    assert [i for i, _, _ in t.since(0)] == list(range(t.dropped, 50))
    assert t.since(49)[0][1] == "action 49" and t.last_reward == 49.0 and t.return_ == sum(range(50))
