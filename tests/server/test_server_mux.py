"""`/v1/ws`: frames of steps over one connection, and the clients that coalesce their steps into them."""

from __future__ import annotations

import asyncio
import json
import re

import httpx
import pytest
from server_helpers import ECHO, call
from websockets.sync.client import connect

import agentrl.client.steps as steps
from agentrl.client import AsyncEnvClient, EnvClient, UnauthorizedError
from agentrl.client.wire import _Wire
from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread


def _episode(base_url: str, seed: int = 0) -> str:
    return httpx.post(f"{base_url}/v1/episodes", json={"env_id": ECHO, "seed": seed}).json()["episode_id"]


def _socket(base_url: str):
    return connect(base_url.replace("http://", "ws://") + "/v1/ws", compression=None, proxy=None)


def _frames_seen(base_url: str) -> tuple[float, float]:
    text = httpx.get(f"{base_url}/metrics").text
    count = re.search(r"^agentrl_step_frame_steps_count (\S+)$", text, re.M)
    total = re.search(r"^agentrl_step_frame_steps_sum (\S+)$", text, re.M)
    return (float(count.group(1)), float(total.group(1))) if count and total else (0.0, 0.0)


def test_a_frame_answers_each_step_in_order_with_errors_in_place(base_url):
    a, b = _episode(base_url, 1), _episode(base_url, 2)
    frame = {"id": 41, "steps": [
        {"episode_id": a, "action": call("echo", text="one")},
        {"episode_id": "missing", "action": "x"},
        {"episode_id": b, "action": call("echo", text="two"), "request_id": "r"},
        {"episode_id": a, "action": call("echo", text="three")},
    ]}
    with _socket(base_url) as ws:
        ws.send(json.dumps(frame).encode())  # binary
        reply = json.loads(ws.recv())
        ws.send(json.dumps({"id": 42, "steps": [frame["steps"][2]]}))  # text; a retry of the same request
        again = json.loads(ws.recv())
    assert reply["id"] == 41 and [r["status"] for r in reply["results"]] == [200, 404, 200, 200]
    first, missing, other, third = reply["results"]
    assert [first["result"]["info"]["turn"], third["result"]["info"]["turn"]] == [1, 2]
    assert '"three"' in third["result"]["observation"] and missing["error"]["error"] == "unknown_episode"
    assert again == {"id": 42, "results": [other]}  # idempotent: the same result, no second step


@pytest.mark.parametrize(("frame", "frame_id"), [
    (b"not json", None),
    (b'{"id": 3, "steps": "x"}', 3),
    (b'{"id": 4, "steps": [{"episode_id": "e", "action": 5}]}', 4),
    (b'{"id": true, "steps": []}', None),
    (b"[1, 2]", None),
])
def test_a_bad_frame_gets_a_clear_error_and_the_connection_lives_on(base_url, frame, frame_id):
    eid = _episode(base_url)
    with _socket(base_url) as ws:
        ws.send(frame)
        refusal = json.loads(ws.recv())
        ws.send(json.dumps({"id": 9, "steps": [{"episode_id": eid, "action": call("echo", text="x")}]}))
        fine = json.loads(ws.recv())
    assert refusal["id"] == frame_id and refusal["status"] == 422
    assert refusal["error"]["error"] == "invalid_request" and refusal["error"]["message"]
    assert fine["results"][0]["status"] == 200


def test_concurrent_steps_of_many_coroutines_share_frames(base_url):
    """64 coroutines stepping at once cost the server a few frames a round, not 64 requests."""
    async def main() -> list[int]:
        async with AsyncEnvClient(base_url) as client:
            created = await asyncio.gather(*(client.create_episode(ECHO, seed=s) for s in range(64)))
            before = _frames_seen(base_url)
            turns = []
            for round_ in range(3):
                results = await asyncio.gather(*(client.step(c.episode_id, call("echo", text=str(round_)))
                                                 for c in created))
                turns.append({r.info["turn"] for r in results})
            after = _frames_seen(base_url)
            return turns, after[0] - before[0], after[1] - before[1]

    turns, frames, stepped = asyncio.run(main())
    assert turns == [{1}, {2}, {3}]
    assert stepped == 3 * 64 and frames <= 3 * 4


def test_a_frame_sent_whole_runs_one_episodes_steps_in_order_among_other_steps(base_url):
    """`step_frame` (a lost episode's replay) sends its 20 steps as one frame of their own while 64
    other coroutines step: never split over frames (which could run out of order), answered in order,
    an error in place; the sync client alike."""
    texts = [str(i) for i in range(20)]
    frame = _Wire.step_frame

    async def main() -> tuple[list, int, float]:
        async with AsyncEnvClient(base_url) as client:
            mine = (await client.create_episode(ECHO, seed=7, env_kwargs={"max_turns": 100})).episode_id
            others = await asyncio.gather(*(client.create_episode(ECHO, seed=s) for s in range(64)))
            before = _frames_seen(base_url)
            got, *_ = await asyncio.gather(
                client._run(frame(mine, [call("echo", text=t) for t in texts] + ["x"])),
                *(client.step(c.episode_id, call("echo", text="other")) for c in others))
            after = _frames_seen(base_url)
            return got, after[0] - before[0], after[1] - before[1]

    got, frames, stepped = asyncio.run(main())
    assert [r.info["turn"] for r in got[:20]] == list(range(1, 21))
    assert [json.loads(r.observation.split("\n")[1])["content"] for r in got[:20]] == texts
    assert got[20].info["turn"] == 21  # plain text: a turn, answered in place
    assert stepped == 21 + 64 and frames <= 1 + 4
    with EnvClient(base_url) as client:
        mine = client.create_episode(ECHO, seed=8).episode_id
        sync_got = client._run(frame(mine, [call("echo", text="a"), call("echo", text="b")]))
        assert [r.info["turn"] for r in sync_got] == [1, 2]
        assert [type(e).__name__ for e in client._run(frame("missing", ["x"]))] == ["UnknownEpisodeError"]


def test_async_client_retries_steps_lost_with_their_connection(base_url, monkeypatch):
    """The connection drops after the server answered a frame; every step in it is retried with its
    request_id on a new connection and none is stepped twice."""
    real_received = steps.AsyncSteps._received
    opened: list[object] = []
    dropped: list[bytes] = []

    def flaky(self, conn, message):
        if conn not in opened:
            opened.append(conn)
        if not dropped:
            dropped.append(message)  # the server has stepped and answered
            conn._end(steps.ConnectionLost("dropped"))  # ... and the answer is lost on the way
            return
        real_received(self, conn, message)

    monkeypatch.setattr(steps.AsyncSteps, "_received", flaky)

    async def main():
        async with AsyncEnvClient(base_url) as client:
            created = await asyncio.gather(*(client.create_episode(ECHO, seed=s) for s in range(8)))
            results = await asyncio.gather(*(client.step(c.episode_id, call("echo", text="x"))
                                             for c in created))
            status = await asyncio.gather(*(client.episode_status(c.episode_id) for c in created))
            return results, status

    results, status = asyncio.run(main())
    assert len(opened) == 2 and len(json.loads(dropped[0])["results"]) >= 1
    assert all(r.info["turn"] == 1 for r in results) and all(s.turns == 1 for s in status)


def test_the_step_socket_needs_the_token_and_says_so():
    with serve_in_thread(ServerConfig(token="s3cret")) as url:
        with EnvClient(url, token="s3cret") as client:
            eid = client.create_episode(ECHO, seed=0).episode_id
            assert client.step(eid, call("echo", text="x")).info["turn"] == 1
        with EnvClient(url, token="wrong") as client, pytest.raises(UnauthorizedError):
            client.step(eid, "x")

        async def anonymous():
            async with AsyncEnvClient(url) as client:
                await client.step(eid, "x")

        with pytest.raises(UnauthorizedError):
            asyncio.run(anonymous())


def test_steps_fail_loudly_when_no_server_answers():
    from agentrl.server.local import free_port

    url = f"http://127.0.0.1:{free_port()}"
    with EnvClient(url, retry=steps_retry()) as client, pytest.raises(httpx.ConnectError):
        client.step("x.y", "x")


def steps_retry():
    from agentrl.client import RetryPolicy

    return RetryPolicy(retries=1, backoff_s=0.01)


def test_episode_ids_name_their_holder(base_url):
    from agentrl.cli import build_parser
    from agentrl.server.cli import config_from_args

    config = config_from_args(build_parser().parse_args(["serve", "--holder", "pod 7/a"]))
    assert config.resolved_holder() == "pod-7-a"
    with serve_in_thread(config) as url, EnvClient(url) as client:
        eid = client.create_episode(ECHO, seed=0).episode_id
        assert eid.startswith("pod-7-a.") and len(eid) == len("pod-7-a.") + 32
        r = httpx.post(f"{url}/v1/episodes/other-pod.{eid.partition('.')[2]}/step", json={"action": "x"})
        assert r.status_code == 404 and "held by 'other-pod'" in r.json()["message"]
