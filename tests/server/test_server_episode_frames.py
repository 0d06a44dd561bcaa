"""An episode's whole life over `/v1/ws`: create, reset, close and fork as frame items beside steps."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from server_helpers import ECHO, FLIGHTS, call
from websockets.sync.client import connect

from agentrl.client import AsyncEnvClient, EnvClient
from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread


def _socket(base_url: str):
    return connect(base_url.replace("http://", "ws://") + "/v1/ws", compression=None, proxy=None)


def _frame(ws, frame_id: int, *items: dict) -> list[dict]:
    ws.send(json.dumps({"id": frame_id, "steps": list(items)}).encode())
    reply = json.loads(ws.recv())
    assert reply["id"] == frame_id, reply
    return reply["results"]


def _live(base_url: str) -> int:
    return httpx.get(f"{base_url}/health").json()["live_episodes"]


@pytest.mark.parametrize("env_id", [ECHO, FLIGHTS])
def test_create_reset_and_close_run_in_the_frames_order_with_steps(base_url, env_id):
    """Echo-v0's calls run right on the loop, Flights-v0's in tasks: the order holds either way."""
    with _socket(base_url) as ws:
        (created,) = _frame(ws, 1, {"op": "create", "env_id": env_id, "seed": 3, "request_id": env_id})
        assert created["status"] == 201 and created["error"] is None
        eid = created["result"]["episode_id"]
        assert created["episode_id"] == eid and created["result"]["env_id"] == env_id
        act = call("echo", text="x")
        results = _frame(ws, 2,
                         {"episode_id": eid, "action": act},
                         {"op": "reset", "episode_id": eid, "seed": 3, "request_id": "r"},
                         {"episode_id": eid, "action": act},
                         {"episode_id": eid, "action": act},
                         {"op": "close", "episode_id": eid, "request_id": "x"},
                         {"episode_id": eid, "action": act})
    assert [r["status"] for r in results] == [200, 200, 200, 200, 200, 404]
    first, reset, after_one, after_two, closed, late = results
    assert reset["result"]["observation"] == created["result"]["observation"]  # same seed, same start
    assert reset["result"]["episode_id"] == eid
    # the steps after the reset count from it; the one before it counted from the create
    assert after_one["result"]["observation"] == first["result"]["observation"]
    assert after_two["result"]["info"].get("turn", 2) == 2 and after_one["result"]["info"].get("turn", 1) == 1
    assert closed["result"] == {"episode_id": eid, "closed": True}
    assert late["error"]["error"] == "episode_closed" and late["result"] is None
    assert httpx.get(f"{base_url}/v1/episodes/{eid}").status_code == 404


def test_a_retried_frame_runs_each_call_once():
    """The same create, reset and close sent again (on another connection, or twice in one frame)
    answer what they answered the first time, and make, reset or close nothing more."""
    with serve_in_thread(ServerConfig()) as url:
        create = {"op": "create", "env_id": ECHO, "seed": 5, "request_id": "once"}
        with _socket(url) as ws:
            (first,) = _frame(ws, 1, create)
        with _socket(url) as ws:
            again, twice = _frame(ws, 7, create, create)
        assert again == first and twice == first and _live(url) == 1
        eid = first["result"]["episode_id"]
        step = {"episode_id": eid, "action": call("echo", text="a")}
        reset = {"op": "reset", "episode_id": eid, "seed": 1, "request_id": "r1"}
        close = {"op": "close", "episode_id": eid, "request_id": "bye"}
        with _socket(url) as ws:
            s1, r1 = _frame(ws, 1, step, reset)
            s2, r1_again, s3 = _frame(ws, 2, step, reset, step)
            assert r1_again == r1  # not reset a second time: the turns go on
            assert [s["result"]["info"]["turn"] for s in (s1, s2, s3)] == [1, 1, 2]
            c1, c1_again = _frame(ws, 3, close, close)
            (c1_later,) = _frame(ws, 4, close)
            assert c1 == c1_again == c1_later and c1["status"] == 200
            (other_close,) = _frame(ws, 5, {**close, "request_id": "another"})
        assert other_close["status"] == 404 and other_close["error"]["error"] == "episode_closed"
        assert _live(url) == 0
        # the HTTP route remembers the create by the same request id
        via_http = httpx.post(f"{url}/v1/episodes", json={k: v for k, v in create.items() if k != "op"})
        assert via_http.status_code == 201 and via_http.json() == first["result"]


def test_capacity_and_a_closed_episodes_late_step_are_errors_in_the_frame():
    with serve_in_thread(ServerConfig(max_episodes=1, reap_interval_s=2.0)) as url, _socket(url) as ws:
        made, refused = _frame(ws, 1, {"op": "create", "env_id": ECHO, "request_id": "a"},
                               {"op": "create", "env_id": ECHO, "request_id": "b"})
        assert made["status"] == 201
        assert refused["status"] == 429 and refused["error"]["error"] == "capacity"
        assert refused["retry_after"] == 2 and refused["episode_id"] is None
        eid = made["result"]["episode_id"]
        closed, late, reset = _frame(ws, 2, {"op": "close", "episode_id": eid},
                                     {"episode_id": eid, "action": call("echo", text="late")},
                                     {"op": "reset", "episode_id": eid})
        assert closed["status"] == 200
        assert [late["status"], reset["status"]] == [404, 404]
        assert late["error"]["error"] == reset["error"]["error"] == "episode_closed"
        # a 429 is not remembered: the same request, retried once there is room, creates
        (retried,) = _frame(ws, 3, {"op": "create", "env_id": ECHO, "request_id": "b"})
        assert retried["status"] == 201
        (unknown,) = _frame(ws, 4, {"op": "create", "env_id": "agentrl/Nope-v0"})
        assert unknown["status"] == 404
        assert unknown["error"]["error"] == "unknown_env"


def test_a_fork_travels_as_a_frame_item(base_url):
    with EnvClient(base_url) as client:
        eid = client.create_episode(ECHO, seed=2).episode_id
        client.step(eid, call("echo", text="before"))
        (child,) = client.fork_episode(eid, 1)
        assert child.parent_id == eid and child.turns == 1
        assert client.step(child.episode_id, call("echo", text="after")).info["turn"] == 2
        assert client.close_episode(child.episode_id) and client.close_episode(eid)


class _DropFirstAnswer:
    """A loopback TCP proxy that, on its first connection, forwards the WebSocket handshake and the
    client's frame but drops the connection instead of passing on the server's answer to it."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.connections = 0
        self.dropped = 0

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        drop = self.connections == 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, answers: bool) -> None:
            handshake = b""
            while data := await src.read(1 << 16):
                if answers and drop and handshake.endswith(b"\r\n\r\n"):
                    self.dropped += 1  # the server answered the frame: the answer is lost
                    writer.close()
                    up_writer.close()
                    return
                if answers:
                    handshake += data[:4096]  # the 101 response passes
                dst.write(data)
                await dst.drain()
            dst.close()

        try:
            await asyncio.gather(pipe(reader, up_writer, False), pipe(up_reader, writer, True),
                                 return_exceptions=True)
        except asyncio.CancelledError:  # the test's loop ended with this connection open: end it quietly
            writer.close()  # (Python 3.11's start_server logs a handler task that ends cancelled)
            up_writer.close()


@pytest.mark.parametrize("sync", [False, True])
def test_a_create_whose_answer_is_lost_is_retried_into_the_one_episode(sync):
    with serve_in_thread(ServerConfig()) as url:
        port = int(url.rsplit(":", 1)[1])

        async def main() -> tuple[str, int, _DropFirstAnswer]:
            proxy = _DropFirstAnswer(port)
            proxied = f"http://127.0.0.1:{await proxy.start()}"
            if sync:
                with EnvClient(proxied) as client:
                    eid = await asyncio.to_thread(lambda: client.create_episode(ECHO, seed=4).episode_id)
                    stepped = await asyncio.to_thread(client.step, eid, call("echo", text="x"))
                    turn = stepped.info["turn"]
            else:
                async with AsyncEnvClient(proxied) as client:
                    eid = (await client.create_episode(ECHO, seed=4)).episode_id
                    turn = (await client.step(eid, call("echo", text="x"))).info["turn"]
            proxy.server.close()
            return eid, turn, proxy

        eid, turn, proxy = asyncio.run(main())
        assert proxy.dropped == 1 and proxy.connections == 2  # lost once, retried on a new connection
        assert turn == 1 and _live(url) == 1  # the retry got the episode the first try made
        assert httpx.get(f"{url}/v1/episodes/{eid}").json()["turns"] == 1
