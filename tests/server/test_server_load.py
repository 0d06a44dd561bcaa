"""A bounded load test: 1,000 live episodes on one server process, all stepped, none lost.

The server runs as `agentrl serve` in its own process so that its memory can be read alone.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import httpx
import pytest
from server_helpers import FLIGHTS, call

from agentrl.client import AsyncEnvClient, StepResult
from agentrl.server.local import free_port

EPISODES = 1000
ENV_ID = FLIGHTS


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


@pytest.fixture(scope="module")
def server_process():
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentrl", "serve", "--port", str(port), "--env", ENV_ID,
         "--max-episodes", str(EPISODES + 10), "--workers", "8"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "AGENTRL_TOKEN": ""},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline and proc.poll() is None, "server did not start"
        time.sleep(0.1)
    yield proc, url
    proc.terminate()
    proc.wait(timeout=60)


@pytest.mark.slow
def test_a_thousand_live_episodes_all_step(server_process):
    proc, url = server_process

    async def main() -> tuple[int, list[str]]:
        async with AsyncEnvClient(url, timeout=120, max_connections=64) as client:
            await client.create_episode(ENV_ID, seed=0)  # warm the env's module and caches first
            baseline = rss_bytes(proc.pid)
            gate = asyncio.Semaphore(32)

            async def create(seed: int) -> str:
                async with gate:
                    return (await client.create_episode(ENV_ID, seed=seed)).episode_id

            ids = await asyncio.gather(*(create(seed) for seed in range(1, EPISODES + 1)))
            grown = rss_bytes(proc.pid) - baseline
            health = await client.health()
            assert health["live_episodes"] == EPISODES + 1
            # two rounds over every episode through the batched endpoint, one through single steps
            for text in ("first", "second"):
                for start in range(0, EPISODES, 250):
                    chunk = ids[start:start + 250]
                    results = await client.step_batch([(eid, call("nothing", text=text)) for eid in chunk])
                    bad = [r for r in results if not isinstance(r, StepResult)]
                    assert not bad, bad[:3]
                    assert all(r.info["turn"] == (1 if text == "first" else 2) for r in results)

            async def single(eid: str) -> StepResult:
                async with gate:
                    return await client.step(eid, call("nothing"))

            singles = await asyncio.gather(*(single(eid) for eid in ids))
            assert all(r.info["turn"] == 3 for r in singles)
            assert len({(await client.episode_status(eid)).episode_id for eid in ids[:10]}) == 10
            return grown, ids

    grown, ids = asyncio.run(main())
    per_episode = grown / EPISODES
    print(f"\n{ENV_ID}: {EPISODES} live episodes; server RSS grew {grown / 2**20:.1f} MiB, "
          f"{per_episode / 1024:.1f} KiB per episode")
    assert per_episode < 8 * 2**20  # a generous bound: the figure itself goes in the report
    metrics = httpx.get(f"{url}/metrics").text
    assert 'agentrl_errors_total{code="env_error"}' not in metrics
    assert f'agentrl_steps_total{{env_id="{ENV_ID}"}} {3.0 * EPISODES}' in metrics
