"""A cluster client reads its holder map once for a burst of calls: the calls sent together by a
fresh client wait for the one read in flight, counted where the map is served; a read that fails is
every waiting call's failure, and the next call reads again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from cluster_helpers import ECHO
from fastapi import FastAPI, Request, Response
from support import AppServer

from agentrl.client import AsyncEnvClient, ServerError
from agentrl.protocol import CLUSTER_PATH, encode_error
from agentrl.sandbox_server import AsyncSandboxCluster, SandboxNotFound
from agentrl.sandbox_server.cluster.discovery import SandboxClusterMap, SandboxHolderInfo
from agentrl.server.cluster.pool import StaticPool, cluster_app
from agentrl.server.config import ServerConfig
from agentrl.server.local import serve_in_thread

BURST = 64  # calls in flight together on one fresh client


@dataclass
class MapReads:
    """The reads of a map its server answered, and how many reads to come it fails (with a 500)."""

    at: list[float] = field(default_factory=list)
    fail: int = 0

    def count_on(self, app: FastAPI) -> None:
        @app.middleware("http")
        async def count(request: Request, call_next):
            if request.method == "GET" and request.url.path == CLUSTER_PATH:
                self.at.append(time.monotonic())
                if self.fail:
                    self.fail -= 1
                    return Response(encode_error("internal_error", "the map is not ready"), 500,
                                    media_type="application/json")
            return await call_next(request)


@pytest.fixture(scope="module")
def two_holders() -> Iterator[tuple[str, MapReads]]:
    """The discovery URL of two Echo-v0 holders served in this process, and its map's reads."""
    with serve_in_thread(ServerConfig(env_ids=(ECHO,), holder="pod-0", ui=False)) as a, \
            serve_in_thread(ServerConfig(env_ids=(ECHO,), holder="pod-1", ui=False)) as b:
        app = cluster_app(StaticPool({"pod-0": a, "pod-1": b}), 2, None)
        reads = MapReads()
        reads.count_on(app)
        with AppServer(app) as front:
            discovery = f"{front.url}{CLUSTER_PATH}"
            deadline = time.monotonic() + 30
            while {h["state"] for h in httpx.get(discovery).json()["holders"]} != {"up"}:
                assert time.monotonic() < deadline, "the static holders did not come up"
                time.sleep(0.05)
            yield discovery, reads


async def _creates(discovery: str, seeds: range) -> list[str | BaseException]:
    async with AsyncEnvClient(discovery) as client:
        made = await asyncio.gather(*(client.create_episode(ECHO, seed=s) for s in seeds),
                                    return_exceptions=True)
        after = await client.create_episode(ECHO, seed=len(seeds))  # a later call, on its own
        return [m if isinstance(m, BaseException) else m.episode_id for m in made] + [after.episode_id]


def test_a_burst_of_creates_on_a_fresh_client_reads_the_map_once(two_holders):
    discovery, reads = two_holders
    reads.at.clear()
    ids = asyncio.run(_creates(discovery, range(BURST)))
    assert all(isinstance(i, str) for i in ids), ids
    assert len(set(ids)) == BURST + 1
    assert {str(i).partition(".")[0] for i in ids} == {"pod-0", "pod-1"}  # the burst spread over both
    assert len(reads.at) <= 2, f"{len(reads.at)} reads of the map for {BURST} creates"


def test_a_failed_read_fails_the_calls_waiting_for_it_and_the_next_call_reads_again(two_holders):
    discovery, reads = two_holders
    reads.at.clear()
    reads.fail = 1
    got = asyncio.run(_creates(discovery, range(8)))
    failed, after = got[:-1], got[-1]
    assert all(isinstance(e, ServerError) and e.status == 500 for e in failed), failed
    assert isinstance(after, str) and after.partition(".")[0] in {"pod-0", "pod-1"}
    assert len(reads.at) == 2  # the one that failed every create of the burst, then the next call's


def test_a_burst_on_a_fresh_sandbox_cluster_client_reads_the_map_once():
    app = FastAPI()
    reads = MapReads()
    reads.count_on(app)

    @app.get(CLUSTER_PATH)
    async def holders() -> SandboxClusterMap:
        return SandboxClusterMap(holders=[SandboxHolderInfo(holder=f"sb-{i}", url=f"http://127.0.0.1:9/{i}",
                                                            state="up") for i in range(2)])

    async def burst(url: str) -> list[BaseException]:
        async with AsyncSandboxCluster(url) as cluster:  # each get of an unknown holder reads the map
            return await asyncio.gather(*(cluster.get(f"nowhere.{i:016x}") for i in range(BURST)),
                                        return_exceptions=True)

    with AppServer(app) as front:
        got = asyncio.run(burst(front.url))
    assert all(isinstance(e, SandboxNotFound) and "names no server" in str(e) for e in got), got[:3]
    assert len(reads.at) <= 2, f"{len(reads.at)} reads of the map for {BURST} lookups"
