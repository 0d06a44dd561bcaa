"""MCP-v0's costs over a bare SDK client, on the tests' notebook server (tests/mcp/servers).

- a step's overhead: the median `env.step` of one `get` call, less the median bare `call_tool` of
  the same tool on the same kind of server through the SDK's own `ClientSession` (measured in the
  same run: the baseline); the aim is at most 1 ms. Beside it, the calling thread's CPU per step:
  the env's own work, which machine load does not stretch as it stretches the hand-over of each
  call to the client's event loop thread;
- an episode's create: the median `env.reset` that takes a warm server from the pool (started ahead
  while the last episode ran), beside the task's own setup time (its files, script and setup calls)
  and a cold reset (no pool: an interpreter, the SDK's import and the handshake).

The task has no state check (those run a call after every step that called the server, which is
the task's cost, not the env's). `--sandbox` measures sandbox isolation too (the Docker engine and
the sandbox image).

- served: MCP-v0 (process isolation) and Flights-v0 behind one `agentrl serve` process, as many
  episodes of each stepped at once through `AsyncEnvClient` (64; 8 in the quick run): steps/s and
  p50/p99 of each side by side. An MCP-v0 step is a call to a server process of its own, so the
  row says what a served episode of a tool server costs beside one of agentrl's own worlds.

    python bench/mcp_env.py             # 500 calls, 10 resets each way
    python bench/mcp_env.py --quick     # 50 calls, 3 resets (CI)
    python bench/mcp_env.py --sandbox   # and the same in sandbox isolation
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym

# Named mcp_env.py, not mcp.py: any process with bench/ on its path (the bench tests put it there)
# would find a bench named mcp.py before the SDK's `mcp`.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from measuring import machine

import agentrl  # noqa: F401  (registers the ids)
from agentrl.mcp.env import IsolationWarning

NOTEBOOK = Path(__file__).resolve().parents[1] / "tests" / "mcp" / "servers" / "notebook.py"
GET = '<tool_call>{"name": "get", "arguments": {"key": "a"}}</tool_call>'
TASK = {
    "id": "bench-0",
    "split": "train",
    "prompt": "Answer note a.",
    "checks": {"answer": "1"},
    "setup": {"files": {"notebook.json": json.dumps({"a": "1"})}},
}


def bare_calls(calls: int) -> list[float]:
    """Seconds per bare `call_tool("get")` through the SDK's ClientSession, one server over stdio."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    async def run() -> list[float]:
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "notebook.json").write_text(json.dumps({"a": "1"}))
            params = StdioServerParameters(command=sys.executable, args=[str(NOTEBOOK), "--dir", folder])
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                seconds = []
                for _ in range(calls):
                    began = time.perf_counter()
                    await session.call_tool("get", {"key": "a"})
                    seconds.append(time.perf_counter() - began)
                return seconds

    return asyncio.run(run())


def make(isolation: str, pool_size: int, max_turns: int) -> Any:
    if isolation == "sandbox":
        task = {
            **TASK,
            "setup": {"files": {**TASK["setup"]["files"], "server/notebook.py": NOTEBOOK.read_text()}},
        }
        server = ["python3", "{workspace}/server/notebook.py", "--dir", "{workspace}"]
    else:
        task, server = TASK, [sys.executable, str(NOTEBOOK), "--dir", "{workspace}"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IsolationWarning)
        return gym.make(
            "agentrl/MCP-v0",
            server=server,
            tasks=[task],
            isolation=isolation,
            pool_size=pool_size,
            max_turns=max_turns,
        ).unwrapped


def steps(env: Any, calls: int) -> tuple[list[float], list[float]]:
    """Seconds per step, wall and the calling thread's CPU (the env's own work: reading the action,
    checking the arguments, writing the observation, hashing the state, handing the call over)."""
    env.reset(seed=0)
    wall, cpu = [], []
    for _ in range(calls):
        began, began_cpu = time.perf_counter(), time.thread_time()
        observation = env.step(GET)[0]
        wall.append(time.perf_counter() - began)
        cpu.append(time.thread_time() - began_cpu)
        assert observation.endswith('"content": "1"}\n</tool_response>'), observation
    return wall, cpu


def resets(env: Any, times: int, warm: bool) -> tuple[list[float], list[float]]:
    """Seconds per reset, and the task's own setup seconds of each episode's server."""
    seconds, setups = [], []
    for _ in range(times):
        if warm:  # the pool's server for the next episode has started: what a warm create takes
            while not all(f.done() for queue in env._pool.ready.values() for f in queue):
                time.sleep(0.01)
        began = time.perf_counter()
        env.reset(seed=0)
        seconds.append(time.perf_counter() - began)
        setups.append(env.server.setup_seconds)
    return seconds, setups


def ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def measure(isolation: str, calls: int, times: int, baseline_ms: float) -> None:
    warm_env, cold_env = make(isolation, 2, calls + 1), make(isolation, 0, calls + 1)
    try:
        wall, cpu = steps(warm_env, calls)
        warm, setups = resets(warm_env, times, warm=True)
        cold, _ = resets(cold_env, times, warm=False)
    finally:
        warm_env.close()
        cold_env.close()
    overhead = ms(wall) - baseline_ms
    rest = (
        "the hand-over to the client's event loop thread and back, which a busy machine stretches"
        if isolation == "process"
        else "the relay of each call to the bridge in the container: a round trip to the sandbox's agent"
    )
    print(
        f"{isolation}: step median {ms(wall):.3f} ms; overhead over the bare call {overhead:.3f} ms "
        f"(aim <= 1 ms: {'met' if overhead <= 1.0 else 'missed'}); the calling thread's CPU per step "
        f"{ms(cpu):.3f} ms (the rest is {rest})"
    )
    print(
        f"{isolation}: create with a warm pool median {ms(warm):.1f} ms (the task's own setup "
        f"{ms(setups):.1f} ms); cold create median {ms(cold):.1f} ms"
    )


async def served_rate(url: str, env_id: str, env_kwargs: dict[str, Any], episodes: int,
                      seconds: float) -> tuple[float, float, float]:
    """Steps/s, p50 and p99 (ms) of `episodes` episodes of `env_id` stepped at once, back to back, for
    `seconds`, through the public async client, after one unmeasured step each."""
    from serving import action_for  # bench/serving.py: the tool call each env is stepped with

    from agentrl.client import AsyncEnvClient

    async with AsyncEnvClient(url, timeout=300, max_connections=64) as client:
        gate = asyncio.Semaphore(16)

        async def create(seed: int) -> tuple[str, str]:
            async with gate:
                created = await client.create_episode(env_id, seed=seed, env_kwargs=env_kwargs)
                action = GET if env_id == "agentrl/MCP-v0" else action_for(env_id, created.info)
                return created.episode_id, action

        episodes_made = await asyncio.gather(*(create(seed) for seed in range(episodes)))
        await asyncio.gather(*(client.step(e, a) for e, a in episodes_made))
        latencies: list[float] = []
        deadline = time.perf_counter() + seconds

        async def run(episode_id: str, action: str) -> None:
            while time.perf_counter() < deadline:
                began = time.perf_counter()
                await client.step(episode_id, action)
                latencies.append(time.perf_counter() - began)

        began = time.perf_counter()
        await asyncio.gather(*(run(e, a) for e, a in episodes_made))
        wall = time.perf_counter() - began
        await asyncio.gather(*(client.close_episode(e) for e, _ in episodes_made))
    latencies.sort()
    return (len(latencies) / wall, latencies[len(latencies) // 2] * 1000,
            latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000)


def served(episodes: int, seconds: float) -> None:
    """MCP-v0 and Flights-v0 served by one `agentrl serve` process (`bench/serving.py`'s, with MCP-v0's
    operator arguments added), each measured alone at `episodes` live episodes."""
    import serving

    from agentrl.server.local import free_port

    mcp_kwargs = {"server": [sys.executable, str(NOTEBOOK), "--dir", "{workspace}"], "tasks": [TASK],
                  "isolation": "process"}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "agentrl", "serve", "--port", str(port), "--max-episodes", "4096",
               "--env", "agentrl/MCP-v0", "--env", serving.FLIGHTS,
               "--env-kwargs", f"agentrl/MCP-v0={json.dumps(mcp_kwargs)}",
               "--env-kwargs", f"{serving.FLIGHTS}={json.dumps(serving.operator_kwargs(serving.FLIGHTS))}"]
    long = {"max_turns": 10**9}  # episodes must not end while being measured
    with serving.process(command, url):
        for env_id in ("agentrl/MCP-v0", serving.FLIGHTS):
            rate, p50, p99 = asyncio.run(served_rate(url, env_id, long, episodes, seconds))
            print(f"served, {episodes} episodes at once: {env_id} {rate:,.0f} steps/s, "
                  f"p50 {p50:.2f} ms, p99 {p99:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few calls and resets (CI)")
    parser.add_argument("--sandbox", action="store_true", help="sandbox isolation too (Docker)")
    args = parser.parse_args()
    calls, times = (50, 3) if args.quick else (500, 10)
    episodes, seconds = (8, 2.0) if args.quick else (64, 10.0)
    print(machine())
    baseline_ms = ms(bare_calls(calls))
    print(f"baseline: bare SDK call_tool median {baseline_ms:.3f} ms ({calls} calls, one stdio server)")
    measure("process", calls, times, baseline_ms)
    if args.sandbox:
        measure("sandbox", calls, times, baseline_ms)
    served(episodes, seconds)


if __name__ == "__main__":
    main()
