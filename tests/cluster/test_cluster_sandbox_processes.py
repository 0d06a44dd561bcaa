"""`agentrl sandbox serve --processes N`: sandboxes spread over real server processes, every call sent
to the process its id names, and a killed process's sandboxes replayed into another (or lost, loudly,
where a replay cannot be exact); Bash-v0 over it, and an env server holding Bash-v0 episodes killed.
Real processes, the real Docker engine, loopback only."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Iterator

import gymnasium as gym
import httpx
import pytest
from cluster_helpers import ServedCluster, ServedSandboxes, answers, need_docker

import agentrl  # noqa: F401  (registers the env ids)
from agentrl.client import EnvClient
from agentrl.client.cluster import EpisodeLostError
from agentrl.core import tool_call as call
from agentrl.sandbox_server import (
    AsyncSandboxCluster,
    SandboxCluster,
    SandboxError,
    SandboxLost,
    SandboxNotFound,
)
from agentrl.sandbox_server.clients import cluster_flows

pytestmark = [pytest.mark.slow, pytest.mark.docker]
BASH = "agentrl/Bash-v0"


@pytest.fixture(scope="module")
def sandboxes() -> Iterator[ServedSandboxes]:
    need_docker()
    served = ServedSandboxes(2)
    try:
        served.wait_up(2)
        yield served
    finally:
        served.stop()


def test_sandboxes_spread_over_the_servers_and_calls_go_to_their_holder(sandboxes):
    holders = {h["holder"] for h in sandboxes.wait_up(2)}
    with SandboxCluster(sandboxes.url) as cluster:
        made = [cluster.create() for _ in range(4)]
        try:
            assert {s.holder for s in made} == holders  # least loaded first: two on each
            for s in made:
                assert s.sandbox_id.startswith(s.holder + ".")
                assert s.exec("echo hi").stdout == "hi\n"
                assert cluster.get(s.sandbox_id).sandbox_id == s.sandbox_id  # routed by its id alone
            assert {i.sandbox_id for i in cluster.list()} >= {s.sandbox_id for s in made}
            with pytest.raises(SandboxNotFound, match="names no server"):
                cluster.get("never-a-holder.0123456789abcdef")
        finally:
            for s in made:
                s.close()
    # the address itself holds no sandbox: it says where to go instead of serving one
    r = httpx.post(f"{sandboxes.url}/v1/sandboxes", json={})
    assert r.status_code == 421 and "/v1/cluster" in r.json()["detail"]


def test_a_stopped_address_leaves_a_client_that_knows_the_map_working(sandboxes, monkeypatch):
    """The address serves only the map (docs/cluster.md, "What is promised under each fault"): with
    it stopped, open sandboxes answer, a create whose read of the map is due is made on a server of
    the map known, and a new client tries the address for `DISCOVERY_WAIT_S`, then says so."""
    sandboxes.wait_up(2)
    monkeypatch.setattr(cluster_flows, "DISCOVERY_WAIT_S", 1.0)
    with SandboxCluster(sandboxes.url, timeout=2.0) as cluster:
        first = cluster.create()
        sandboxes.proc.send_signal(signal.SIGSTOP)
        try:
            cluster._routes.read_at = -1e9  # as after REFRESH_S: the next create reads the map
            with cluster.create() as late:
                assert late.exec("echo late").stdout == "late\n"
            assert first.exec("echo first").stdout == "first\n"
            assert cluster._routes.map_misses == 1
            with SandboxCluster(sandboxes.url, timeout=0.5) as new, \
                    pytest.raises(SandboxError, match="did not answer") as raised:
                new.create()
            assert sandboxes.url in str(raised.value)
        finally:
            sandboxes.proc.send_signal(signal.SIGCONT)
        first.close()


def test_the_async_client_spreads_routes_and_replays(sandboxes):
    sandboxes.wait_up(2)

    async def run() -> None:
        async with AsyncSandboxCluster(sandboxes.url + "/v1/cluster") as cluster:
            made = await asyncio.gather(cluster.create(), cluster.create())  # in flight together: spread
            assert len({s.holder for s in made}) == 2
            await made[0].exec("export MARK=async")
            sandboxes.kill_holder(made[0].holder)
            out = await made[0].exec("echo $MARK")
            assert out.stdout == "async\n" and made[0].replays == 1
            assert (await made[1].exec("echo $((6 * 7))")).stdout == "42\n"
            for s in made:
                await s.aclose()

    asyncio.run(run())
    sandboxes.wait_up(2)


def test_a_token_guards_the_map_and_every_server():
    need_docker()
    served = ServedSandboxes(2, pool_size=0, token="s3cret-token")
    try:
        served.wait_up(2)
        assert httpx.get(f"{served.url}/v1/cluster").status_code == 401
        holder_url = served.holders()[0]["url"]
        assert httpx.post(f"{holder_url}/v1/sandboxes", json={}).status_code == 401
        with SandboxCluster(served.url, token="s3cret-token") as cluster, cluster.create() as sandbox:
            assert sandbox.exec("echo ok").stdout == "ok\n"
    finally:
        served.stop()


def test_a_killed_server_s_sandboxes_are_replayed_into_another_or_lost_loudly(sandboxes):
    sandboxes.wait_up(2)
    victim = sandboxes.holders()[0]["holder"]
    with SandboxCluster(sandboxes.url, near=victim) as cluster:
        exact, clocked, later = cluster.create(), cluster.create(), cluster.create()
        assert exact.holder == clocked.holder == later.holder == victim
        later.write_file("x.txt", "x\n")
        exact.exec("mkdir -p d && cd d && export MARK=kept")
        exact.write_file("d/f.txt", "one\n")
        clocked.exec("date +%s%N")  # its answer cannot come again
        sandboxes.kill_holder(victim)
        started = time.monotonic()
        out = exact.exec("echo $MARK; pwd; cat f.txt")
        assert out.stdout == "kept\n/workspace/d\none\n" and out.status == "ok"
        assert exact.replays == 1 and exact.holder != victim
        assert time.monotonic() - started < 60  # nothing hangs
        with pytest.raises(SandboxLost, match=r"call 1 \(exec 'date"):
            clocked.exec("true")
        with pytest.raises(SandboxLost):  # and stays lost
            clocked.exec("true")
        # the killed server is started again on its port, under its name, without its sandboxes:
        # a call there is answered "no such sandbox", which is a loss too
        victim_url = next(h["url"] for h in sandboxes.holders() if h["holder"] == victim)
        deadline = time.monotonic() + 120
        while not answers(victim_url, 2):
            assert time.monotonic() < deadline, f"{victim} not restarted"
            time.sleep(0.1)
        assert later.read_file("x.txt") == b"x\n" and later.replays == 1  # a read: replayed, not recorded
        for s in (clocked, exact, later):
            s.close()
    sandboxes.wait_up(2)


# answers each connection with how many it has had: what a relay answers depends on the relays before it
COUNTER = """
import socket
server = socket.socket()
server.bind(("127.0.0.1", 5000))
server.listen()
open("/tmp/up", "w").close()
count = 0
while True:
    conn = server.accept()[0]
    count += 1
    conn.recv(99)
    conn.sendall(b"%d\\n" % count)
    conn.close()
"""


def test_relays_go_to_the_holder_and_are_replayed_in_order_when_it_is_lost(sandboxes):
    sandboxes.wait_up(2)
    victim = sandboxes.holders()[0]["holder"]
    with SandboxCluster(sandboxes.url, near=victim) as cluster, cluster.create() as sb:
        sb.write_file("counter.py", COUNTER)
        started = sb.exec("python3 counter.py & until [ -e /tmp/up ]; do sleep 0.01; done", keep_alive=True)
        assert started.status == "ok", started
        assert [sb.relay(5000, "n\n").data for _ in range(2)] == ["1\n", "2\n"]
        # the address itself relays nothing: it names the map, as for every sandbox route
        relay_url = f"{sandboxes.url}/v1/sandboxes/{sb.sandbox_id}/relay"
        front = httpx.post(relay_url, json={"port": 1, "data": ""})
        assert front.status_code == 421 and "/v1/cluster" in front.json()["detail"]
        sandboxes.kill_holder(victim)
        # rebuilt elsewhere: the server started again and both relays made again, answering as before
        assert sb.relay(5000, "n\n").data == "3\n"
        assert sb.replays == 1 and sb.holder != victim
    sandboxes.wait_up(2)


def test_bash_episode_goes_on_when_its_sandbox_server_dies(sandboxes):
    sandboxes.wait_up(2)
    steps = [call("execute_bash", command="cd /workspace && mkdir -p s && export MARK=shell-state"),
             call("write_file", path="s/a.txt", content="one\n"),
             call("execute_bash", command="echo $MARK; pwd; cat s/a.txt; ls s"),
             call("read_file", path="s/a.txt")]
    env = gym.make(BASH, sandbox_url=sandboxes.url + "/v1/cluster").unwrapped
    reference = gym.make(BASH, sandbox_url=sandboxes.url + "/v1/cluster").unwrapped
    try:
        for e in (env, reference):
            e.reset(seed=3, options={"family": "count_files"})
        got = [env.step(a)[:4] for a in steps[:2]]
        want = [reference.step(a)[:4] for a in steps]
        sandboxes.kill_holder(env.sandbox.holder)
        got += [env.step(a)[:4] for a in steps[2:]]
        assert got == want and env.sandbox.replays == 1
    finally:
        env.close()
        reference.close()
    sandboxes.wait_up(2)


def test_a_killed_env_server_s_bash_episodes_are_replayed_or_lost(sandboxes):
    """Bash-v0 episodes on two env-server processes (their sandboxes on the sandbox servers): the
    holder of some is killed with a step in flight; each episode goes on elsewhere with the same
    observations, except the one whose replay answers differently (the clock), which raises
    `EpisodeLostError`."""
    sandboxes.wait_up(2)
    kwargs = f'{BASH}={{"sandbox_url": "{sandboxes.url}/v1/cluster", "command_timeout_s": 10}}'
    served = ServedCluster("processes", 2, envs=(BASH,), extra=("--env-kwargs", kwargs))
    try:
        served.wait_up(2)
        with EnvClient(served.discovery) as client:
            made = [client.create_episode(BASH, seed=i, options={"family": "count_files"}) for i in range(4)]
            victim = made[0].episode_id.partition(".")[0]
            on_victim = [m for m in made if m.episode_id.startswith(victim + ".")]
            assert len(on_victim) == 2
            for m in made:
                mark = call("execute_bash", command=f"export N={m.episode_id[-4:]}; cd /tmp")
                client.step(m.episode_id, mark)
            client.step(on_victim[1].episode_id, call("execute_bash", command="date +%s%N"))
            in_flight: dict[str, object] = {}

            def slow_step() -> None:
                try:
                    in_flight["got"] = client.step(on_victim[0].episode_id,
                                                   call("execute_bash", command="sleep 2; echo $N; pwd"))
                except Exception as exc:  # recorded for the assertion below
                    in_flight["got"] = exc

            thread = threading.Thread(target=slow_step)
            thread.start()
            time.sleep(0.5)
            served.kill_holder(victim)
            thread.join(timeout=120)
            assert not thread.is_alive(), "a step in flight on a killed holder hangs"
            got = in_flight["got"]
            assert not isinstance(got, BaseException), got
            assert f"{on_victim[0].episode_id[-4:]}\\n/tmp" in got.observation  # type: ignore[attr-defined]
            with pytest.raises(EpisodeLostError, match="answered differently"):
                client.step(on_victim[1].episode_id, call("execute_bash", command="true"))
            for m in made:
                if m is not on_victim[1]:
                    out = client.step(m.episode_id, call("execute_bash", command="echo $N"))
                    assert f'\\n{m.episode_id[-4:]}"' in out.observation
            for m in made:
                if m is not on_victim[1]:
                    client.close_episode(m.episode_id)
    finally:
        served.stop()
