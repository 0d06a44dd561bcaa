"""verifiers: one rollout of the `agentrl-verifiers` taskset through verifiers' v1 path (env, agent
interaction, interception, trace scoring) against a scripted OpenAI-compatible server on loopback;
the reward recorded on the trace is the env's."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from integrations_helpers import FLIGHTS, counters, replay, require, served, solved_seed
from support import AppServer

vf = require("verifiers.v1")


def scripted_model(replies: list[str]) -> tuple[FastAPI, list[list[dict[str, Any]]]]:
    """`POST /v1/chat/completions` answering the n-th assistant turn of a conversation with
    `replies[n]` (then "Done."); every request's messages are kept for the test to read."""
    app = FastAPI()
    seen: list[list[dict[str, Any]]] = []

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> dict[str, Any]:
        body = await request.json()
        messages = body["messages"]
        seen.append(messages)
        turn = sum(1 for m in messages if m["role"] == "assistant")
        text = replies[turn] if turn < len(replies) else "Done."
        return {"id": f"chatcmpl-{len(seen)}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", "scripted"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}

    return app, seen


async def one_rollout(env: Any, model_url: str) -> Any:
    ctx = vf.ModelContext(model="scripted", client=vf.EvalClientConfig(base_url=f"{model_url}/v1",
                                                                        api_key_var="AGENTRL_TEST_KEY"))
    async with env.serving():
        [task] = list(env.taskset.take(1))
        [slot] = env.slots(task, 1)
        return await env.run_slot(slot, ctx)


def test_one_rollout_records_the_env_reward():
    seed, actions = solved_seed("train")
    app, seen = scripted_model(actions)
    with served() as url, AppServer(app) as model:
        expected = replay(url, FLIGHTS, seed, "train", actions)
        before = counters(url)
        config = vf.resolve_env_config({"taskset": {
            "id": "agentrl-verifiers", "env_id": FLIGHTS, "base_url": url, "split": "train",
            "first_seed": seed, "num_tasks": 1}})
        env = vf.load_environment(config)
        episode = asyncio.run(one_rollout(env, model.url))
        after = counters(url)

    assert episode.ok, episode.errors
    [trace] = episode.traces
    env_reward = sum(r for _, r, _ in expected)
    assert env_reward == 1.0
    assert trace.rewards["agentrl_reward"].score == env_reward
    assert trace.reward == env_reward
    # the model saw the env's observations as user turns, in order
    user_turns = [m["content"] for m in seen[-1] if m["role"] == "user"]
    assert user_turns == [o for o, _, done in expected if not done]
    assert len(seen) == len(actions)
    assert after.created == before.created + 1 and after.steps == before.steps + len(actions)
    assert after.live == 0 and after.closed == before.closed + 1


def test_the_taskset_loads_seeded_tasks_and_bundles_its_harness():
    config = vf.resolve_env_config({"taskset": {"id": "agentrl-verifiers", "env_id": FLIGHTS,
                                                "first_seed": 5, "num_tasks": 3, "split": "test"}})
    env = vf.load_environment(config)
    tasks = list(env.taskset)
    assert [t.data.seed for t in tasks] == [5, 6, 7] and {t.data.split for t in tasks} == {"test"}
    assert all(t.data.prompt is None for t in tasks)  # the env opens the exchange
    assert type(env).__name__ == "AgentrlEnv"
    assert env.config.agent_harnesses()["player"].id == "agentrl-verifiers"


def test_a_failing_model_still_deletes_the_episode():
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def broken() -> JSONResponse:
        return JSONResponse({"error": {"message": "model not loaded"}}, status_code=400)

    with served() as url, AppServer(app) as model:
        before = counters(url)
        config = vf.resolve_env_config({"taskset": {"id": "agentrl-verifiers", "env_id": FLIGHTS,
                                                    "base_url": url, "num_tasks": 1}})
        episode = asyncio.run(one_rollout(vf.load_environment(config), model.url))
        after = counters(url)
    assert not episode.ok
    assert after.created == before.created + 1 and after.steps == before.steps
    assert after.live == 0 and after.closed == before.closed + 1
