"""`agentrl serve --ray` over three Ray nodes on loopback: the holders spread one per node, and a
node lost with everything on it (its raylet and its workers SIGKILLed) while episodes step loses
no episode: each is replayed on another node's holder with the same observations, rewards and end
flags as in-process, and the map reports the lost node's holder `down`."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest
from cluster_helpers import ECHO, FLIGHTS, RAY_ENV, START_TIMEOUT_S, ServedCluster, need_ray

import agentrl  # noqa: F401  (registers the env ids)
from agentrl.client import AsyncEnvClient
from agentrl.core import tool_call as call

pytestmark = [pytest.mark.slow, pytest.mark.ray]
EPISODES, STEPS, KILL_AT = 18, 6, 3
# the GCS calls a node dead after this many missed health checks of this period (Ray's defaults
# take 15 to 30 s); generous enough that a loaded machine's stalls do not kill a node
HEAD_SYSTEM_CONFIG = {"health_check_period_ms": 1000, "health_check_failure_threshold": 10,
                      "health_check_timeout_ms": 5000}


@pytest.fixture(scope="module")
def three_nodes() -> Iterator[object]:
    """A head and two more nodes of one Ray CPU each; this process does not join as a driver."""
    os.environ.update(RAY_ENV)
    need_ray()
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "_system_config": HEAD_SYSTEM_CONFIG})
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()


def raylet_pid(node) -> int:
    import ray._private.ray_constants as ray_constants

    return node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[1])


def script(env_id: str, seed: int) -> list[str]:
    """A fixed script per episode: tool calls, a malformed one, plain text."""
    if env_id == ECHO:
        pool = [call("echo", text=f"{seed}-{i}") for i in range(3)] + ["no call here"]
    else:
        pool = [call("search_flights", origin="JFK", destination="LAX", date=f"2025-03-0{seed % 9 + 1}"),
                "<tool_call>{not json</tool_call>", "thinking out loud"]
    return [pool[(seed + i) % len(pool)] for i in range(STEPS)]


def in_process(env_id: str, seed: int) -> list[tuple]:
    """What the episode answers in-process: every replay must answer the same."""
    env = gym.make(env_id).unwrapped
    try:
        seen = [(env.reset(seed=seed)[0],)]
        for action in script(env_id, seed):
            observation, reward, terminated, truncated, _ = env.step(action)
            seen.append((observation, reward, terminated, truncated))
            if terminated or truncated:
                break
        return seen
    finally:
        env.close()


def test_a_lost_node_loses_no_episode(three_nodes):
    served = ServedCluster("ray", 3, extra=("--ray-address", three_nodes.address, "--ray-cpus", "0.4"))
    try:
        holders = served.wait_up(3)
        # 0.4 CPU each would fit two on a node: SPREAD puts one on each
        raylets = {raylet_pid(node): node for node in [three_nodes.head_node, *three_nodes.worker_nodes]}
        node_of = {h["holder"]: raylets[parent_of(served.holder_pid(h["holder"]))] for h in holders}
        assert len({id(node) for node in node_of.values()}) == 3, node_of
        victim_node = next(iter(three_nodes.worker_nodes))
        victim = next(name for name, node in node_of.items() if node is victim_node)
        victim_raylet = raylet_pid(victim_node)

        def lose_node() -> None:
            """SIGKILL the node's workers (the holder among them), then its raylet and the rest."""
            for pid in Path(f"/proc/{victim_raylet}/task/{victim_raylet}/children").read_text().split():
                os.kill(int(pid), signal.SIGKILL)
            three_nodes.remove_node(victim_node, allow_graceful=False)

        specs = [(ECHO if i % 2 else FLIGHTS, 300 + i) for i in range(EPISODES)]

        async def main() -> tuple[list[list[tuple]], object]:
            async with AsyncEnvClient(served.discovery) as client:
                made = await asyncio.gather(*(client.create_episode(e, seed=s) for e, s in specs))
                assert victim in {m.episode_id.partition(".")[0] for m in made}
                seen = [[(m.observation,)] for m in made]

                async def step(i: int, k: int) -> None:
                    if len(seen[i]) == k + 1 and not (k and any(seen[i][-1][2:])):
                        out = await client.step(made[i].episode_id, script(*specs[i])[k])
                        seen[i].append((out.observation, out.reward, out.terminated, out.truncated))

                for k in range(STEPS):
                    steps = asyncio.gather(*(step(i, k) for i in range(EPISODES)))
                    if k == KILL_AT:  # the round's steps are on the wire when the node goes
                        await asyncio.sleep(0.005)
                        await asyncio.to_thread(lose_node)
                    await asyncio.wait_for(steps, timeout=START_TIMEOUT_S)
                await asyncio.gather(*(client.close_episode(m.episode_id) for m in made))
                return seen, client.cluster.stats

        seen, stats = asyncio.run(main())
        divergent = [spec for spec, got in zip(specs, seen, strict=True) if got != in_process(*spec)]
        assert divergent == [] and stats.lost == 0
        assert stats.episodes >= 1  # the lost node's episodes were replayed
        # the map reports the lost node's holder down once Ray calls its actor dead; the others stay up
        states = served.wait(lambda hs: {h["holder"]: h["state"] for h in hs}
                             if any(h["holder"] == victim and h["state"] == "down" for h in hs) else None,
                             what=f"{victim} reported down")
        assert {name: state for name, state in states.items() if name != victim} == {
            name: "up" for name in node_of if name != victim}
    finally:
        served.stop()
