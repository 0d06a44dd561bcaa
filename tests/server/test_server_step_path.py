"""One step path: every entry (HTTP step, `/v1/step`, a `/v1/ws` frame, OpenEnv's `/ws`) answers a
step with the same result and an error with the same body, a result is built one way in-process and
served, every client reads an item the same way, and the clients run without the server package."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap

import httpx
import numpy as np
import pytest
from server_helpers import ECHO, call
from websockets.sync.client import connect

from agentrl.client import AsyncEnvClient, EnvClient, UnknownEpisodeError
from agentrl.client.steps import SyncSteps
from agentrl.driver import Episode
from agentrl.echo import EchoEnv
from agentrl.protocol import Answer, read_item
from agentrl.registration import make_env


def _episode(http: httpx.Client, seed: int) -> str:
    created = http.post("/v1/episodes", json={"env_id": ECHO, "seed": seed, "env_kwargs": {"max_turns": 50}})
    assert created.status_code == 201
    return created.json()["episode_id"]


def test_every_entry_answers_a_step_with_the_same_result_and_an_error_with_the_same_body(base_url):
    action = call("echo", text="same")
    with httpx.Client(base_url=base_url) as http:
        ids = [_episode(http, seed=7) for _ in range(4)]
        one = http.post(f"/v1/episodes/{ids[0]}/step", json={"action": action})
        batch = http.post("/v1/step", json={"steps": [{"episode_id": ids[1], "action": action},
                                                      {"episode_id": "nobody", "action": action}]})
        missing = http.post("/v1/episodes/nobody/step", json={"action": action})
    steps = SyncSteps(base_url, {}, 10.0, 2**20)
    framed = steps.send({"episode_id": ids[2], "action": action})
    framed_missing = steps.send({"episode_id": "nobody", "action": action})
    steps.close()
    ws_url = base_url.replace("http://", "ws://") + f"/openenv/{ECHO}/ws"
    with connect(ws_url) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"seed": 7, "env_kwargs": {"max_turns": 50}}}))
        ws.recv()
        ws.send(json.dumps({"type": "step", "data": {"action": action}}))
        openenv = json.loads(ws.recv())["data"]

    result = one.json()
    stepped, lost = (read_item(item) for item in batch.json()["results"])
    assert stepped == Answer(200, result) and framed == Answer(200, result)
    assert (openenv["observation"]["text"], openenv["reward"], openenv["observation"]["info"]) == (
        result["observation"], result["reward"], result["info"])
    assert missing.status_code == 404 and lost == framed_missing == Answer(404, missing.json())


def test_every_client_reads_a_step_and_an_error_alike(base_url):
    action = call("echo", text="x")

    async def with_async() -> tuple:
        async with AsyncEnvClient(base_url) as client:
            ep = (await client.create_episode(ECHO, seed=3)).episode_id
            result = await client.step(ep, action)
            batch = await client.step_batch([(ep, action), ("nobody", action)])
            try:
                await client.step("nobody", action)
            except UnknownEpisodeError as exc:
                return result, batch, exc
        raise AssertionError("a step of no episode must fail")

    with EnvClient(base_url) as client:
        ep = client.create_episode(ECHO, seed=3).episode_id
        result = client.step(ep, action)
        batch = client.step_batch([(ep, action), ("nobody", action)])
        with pytest.raises(UnknownEpisodeError) as raised:
            client.step("nobody", action)
    a_result, a_batch, a_error = asyncio.run(with_async())
    assert result == a_result and batch[0] == a_batch[0] and batch[0].info["turn"] == 2
    errors = [raised.value, batch[1], a_batch[1], a_error]
    assert all(type(e) is UnknownEpisodeError for e in errors)
    assert len({(e.status, e.code, e.message) for e in errors}) == 1


def test_a_step_result_is_built_one_way_in_process_and_served(base_url, monkeypatch):
    """An env paying numpy values (a NaN reward, numpy flags) gives the same plain `StepResult` played
    in-process as served and read back by a client: every path builds it with `StepResult.of`."""
    plain_step = EchoEnv.step

    def numpy_step(self: EchoEnv, action: str) -> tuple:
        observation, _, terminated, truncated, info = plain_step(self, action)
        return observation, np.float32("nan"), np.bool_(terminated), np.bool_(truncated), info

    monkeypatch.setattr(EchoEnv, "step", numpy_step)  # the server runs in this process: it steps this too
    action = call("echo", text="x")
    with EnvClient(base_url) as client:
        ep = client.create_episode(ECHO, seed=3).episode_id
        served = client.step(ep, action)
        client.close_episode(ep)
    episode = Episode(make_env(ECHO))
    episode.begin(seed=3)
    local = episode.step(action)
    episode.close()
    assert local == served and local.reward == 0.0
    assert [type(v) for v in local.as_tuple()[1:4]] == [type(v) for v in served.as_tuple()[1:4]] == [
        float, bool, bool]


def test_an_env_that_fails_to_render_is_answered_with_an_error_body(base_url, monkeypatch):
    """A render runs as every other operation does: an env that raises is a 500 with the error shape
    of every route, and the episode goes on."""

    def broken(self: EchoEnv) -> str:
        raise RuntimeError("no screen")

    monkeypatch.setattr(EchoEnv, "render", broken)
    with httpx.Client(base_url=base_url) as http:
        eid = _episode(http, seed=1)
        failed = http.get(f"/v1/episodes/{eid}/render")
        assert failed.status_code == 500
        assert failed.json() == {"error": "env_error",
                                 "message": "agentrl/Echo-v0 raised while rendering: RuntimeError: no screen"}
        stepped = http.post(f"/v1/episodes/{eid}/step", json={"action": call("echo", text="on")})
        assert stepped.status_code == 200
        http.delete(f"/v1/episodes/{eid}")


BLOCKED = """
import importlib.abc, json, sys

class NoServer(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "agentrl.server" or name.startswith("agentrl.server."):
            raise ImportError(f"a client imported {name}")
        return None

sys.meta_path.insert(0, NoServer())
import agentrl.client, agentrl.client.steps, agentrl.client.cluster, agentrl.protocol
from agentrl.client import EnvClient

with EnvClient(sys.argv[1]) as client:
    ep = client.create_episode("agentrl/Echo-v0", seed=1).episode_id
    result = client.step(ep, "hello")
    client.close_episode(ep)
print(json.dumps({"observation": result.observation,
                  "server": sorted(m for m in sys.modules if m.startswith("agentrl.server"))}))
"""


def test_the_clients_run_without_the_server_package(base_url):
    """The clients and the protocol import nothing of `agentrl.server`: a process that cannot import
    it still plays an episode."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(BLOCKED), base_url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["server"] == [] and out["observation"]
