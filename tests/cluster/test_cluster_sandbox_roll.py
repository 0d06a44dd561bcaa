"""Drain and rolling restart of sandbox servers (`agentrl sandbox serve --processes N`): a drained
server takes no new sandboxes and stops once its last one is closed; `agentrl sandbox cluster roll`
replaces every server, one at a time, while sandboxes are in use, and no sandbox is lost or changed:
those a drained server still held past the bound are replayed by their client on another server
(`clients/cluster_flows.py`), and every exec answers what the session's own calls make it answer.
The p99 exec latency during the roll is printed. Real processes, loopback only."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import httpx
import pytest
from cluster_helpers import START_TIMEOUT_S, ServedSandboxes, answers, check_rolled, latencies, need_docker

from agentrl.sandbox_server import AsyncSandboxCluster, SandboxCluster, SandboxError

SHORT, LONG = 6, 2  # sessions at once: short ones (closed and begun again), long ones outlasting the roll
SHORT_EXECS = 6
LONG_EXECS = 300  # a long session's most execs (30 s at least): its server is stopped under it
WITHIN_S = 1.5
OPERATOR, TENANT = "operator-token", "tenant-token"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentrl", *args], capture_output=True, text=True,
                          timeout=START_TIMEOUT_S)


@pytest.mark.slow
def test_a_drained_sandbox_server_takes_no_new_sandboxes_and_stops_once_its_last_is_closed():
    """No bound: the drained server keeps serving the sandbox it holds, new ones go to the other,
    and it stops once that one is closed. Only the server's own token adds or drains, and the env
    servers' roll refuses this address before changing anything."""
    served = ServedSandboxes(2, pool_size=0, token=OPERATOR,
                             extra=("--backend", "local", "--tenant", f"t={TENANT}"))
    try:
        first, second = (h["holder"] for h in served.wait_up(2))
        tenant = {"Authorization": f"Bearer {TENANT}"}
        assert httpx.get(served.discovery, headers=tenant).status_code == 200
        for path, body in (("/holders", {"n": 1}), (f"/holders/{first}/drain", None)):
            assert httpx.post(served.discovery + path, json=body, headers=tenant).status_code == 401
            assert httpx.post(served.discovery + path, json=body).status_code == 401
        wrong = cli("cluster", "roll", "--url", served.url, "--token", OPERATOR)
        assert wrong.returncode == 1 and "gives no live_episodes" in wrong.stdout, wrong.stdout + wrong.stderr
        assert len(served.holders()) == 2  # nothing added, nothing drained
        operator = {"Authorization": f"Bearer {OPERATOR}"}
        bad = httpx.post(f"{served.discovery}/holders", json={"n": 0}, headers=operator)
        assert bad.status_code == 422
        unknown = httpx.post(f"{served.discovery}/holders/nobody/drain", headers=operator)
        assert unknown.status_code == 404 and unknown.json()["kind"] == "not_found"
        assert first in unknown.json()["detail"]

        with SandboxCluster(served.url, token=OPERATOR, near=first) as cluster:
            held = cluster.create()
            held.exec("export MARK=held")
            assert held.holder == first
            served.wait(lambda hs: any(h["holder"] == first and h["live_sandboxes"] == 1 for h in hs), 30,
                        f"{first}'s sandbox in the map")
            drained = cli("sandbox", "cluster", "drain", first, "--url", served.url, "--token", OPERATOR)
            assert drained.returncode == 0, drained.stdout + drained.stderr
            assert '"state": "draining"' in drained.stdout and '"live_sandboxes": 1' in drained.stdout
            cluster._routes.read_at = -1e9  # as after REFRESH_S: the next create reads the map
            with cluster.create() as fresh:  # `near` names the drained one: it is passed over
                assert fresh.holder == second
            time.sleep(1.0)  # health checks meanwhile: the sandbox it holds keeps it running
            assert {h["holder"]: h["state"] for h in served.holders()}[first] == "draining"
            assert held.exec("echo $MARK").stdout == "held\n" and held.replays == 0
            url = next(h["url"] for h in served.holders() if h["holder"] == first)
            held.close()
        served.wait(lambda hs: {h["holder"]: h["state"] for h in hs}[first] == "down", 30, f"{first} down")
        deadline = time.monotonic() + 30
        while answers(url, 0.5):
            assert time.monotonic() < deadline, f"{first} still answers after its drain"
            time.sleep(0.1)
    finally:
        served.stop()


@pytest.mark.slow
@pytest.mark.docker
def test_a_rolling_restart_of_sandbox_servers_loses_no_sandbox():
    need_docker()
    served = ServedSandboxes(2, pool_size=2)
    try:
        before = {h["holder"] for h in served.wait_up(2)}
        sessions, lost, exec_ms, (code, out) = asyncio.run(_roll_under_load(served))
        check_rolled(served, before, code, out, "live_sandboxes")
        divergent = [(seed, k, got) for seed, answers_, _ in sessions
                     for k, got in enumerate(answers_) if got != expected(seed, k)]
        assert lost == [] and divergent == []
        replayed = sum(replays for _, _, replays in sessions)
        assert replayed >= 1  # the long sessions a drained server still held were replayed
        assert len(sessions) > SHORT + LONG and len(exec_ms) > 50
        print(f"\nsandbox rolling restart: {len(sessions)} sandboxes, {len(exec_ms)} execs during the roll, "
              f"{latencies(exec_ms)}, {replayed} replays\n"
              + "\n".join(line for line in out.splitlines() if " -> " in line))
    finally:
        served.stop()


def expected(seed: int, k: int) -> str:
    """What exec `k` of the session of `seed` answers: its shell's variable, its file's lines, the
    file written at its start and its working directory, all made by its own earlier calls."""
    return f"{seed}-{k + 1}-{seed}-/workspace/w\n"


async def _roll_under_load(served: ServedSandboxes):
    """Sandbox sessions running while `agentrl sandbox cluster roll` runs; returns each session's
    (seed, exec answers, replays), the sessions lost (the error each raised), the latencies of the
    execs during the roll and the roll's exit code and output."""
    sessions: list[tuple[int, list[str], int]] = []
    lost: list[str] = []
    exec_ms: list[float] = []
    rolling, rolled = asyncio.Event(), asyncio.Event()
    seeds = iter(range(1000, 10**6))

    async def session(cluster: AsyncSandboxCluster, seed: int, long: bool) -> None:
        answers_: list[str] = []
        async with await cluster.create() as sandbox:
            await sandbox.exec(f"mkdir -p /workspace/w && cd /workspace/w && export S={seed}")
            await sandbox.write_file("w/seed.txt", f"{seed}\n")
            for k in range(LONG_EXECS if long else SHORT_EXECS):
                if long and rolled.is_set():
                    break
                began = time.monotonic()
                out = await sandbox.exec(f"echo {k} >> log; echo $S-$(wc -l < log)-$(cat seed.txt)-$(pwd)")
                if rolling.is_set() and not rolled.is_set():
                    exec_ms.append((time.monotonic() - began) * 1000)
                answers_.append(out.stdout)
                await asyncio.sleep(0.1 if long else 0.01)
            sessions.append((seed, answers_, sandbox.replays))

    async def worker(cluster: AsyncSandboxCluster, long: bool) -> None:
        while not rolled.is_set():
            seed = next(seeds)
            try:
                await session(cluster, seed, long)
            except (SandboxError, httpx.HTTPError) as exc:
                lost.append(f"session {seed}: {type(exc).__name__}: {exc}")

    async with AsyncSandboxCluster(served.discovery) as cluster:
        workers = [asyncio.create_task(worker(cluster, i < LONG)) for i in range(SHORT + LONG)]
        await asyncio.sleep(1.0)
        rolling.set()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentrl", "sandbox", "cluster", "roll", "--url", served.url,
            "--within", str(WITHIN_S), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=2 * START_TIMEOUT_S)
        rolled.set()
        await asyncio.wait_for(asyncio.gather(*workers), timeout=START_TIMEOUT_S)
        return sessions, lost, exec_ms, (proc.returncode, out.decode())
