"""verifiers: one rollout of the `agentrl-verifiers` taskset through verifiers' v1 path (env, agent
interaction, interception, trace scoring) against a scripted OpenAI-compatible server on loopback;
the reward recorded on the trace is the env's."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from integrations_helpers import FLIGHTS, as_call, counters, replay, require, served, solved_seed
from support import AppServer

from agentrl.core.tool_calls import task_text
from agentrl.core.users import STOP
from agentrl.integrations.episode import tool_result

vf = require("verifiers.v1")
TAU = "agentrl/TauAirline-v0"
TAU_DATA = Path(__file__).parents[1] / "tau_airline" / "data_tau2"  # an invented domain, τ²-bench's layout


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


# --- native tool calling: tools typed in the request, calls read from `tool_calls` --------------------
Plan = Callable[[list[dict[str, Any]]], "list[tuple[str, str]] | str"]


def tool_call_model(plan: Plan) -> tuple[FastAPI, list[dict[str, Any]]]:
    """`POST /v1/chat/completions` that calls tools only through `tool_calls`: `plan(messages)` gives
    the reply's calls as (name, arguments text), or a string for a plain reply without calls. Every
    request body is kept for the test to read."""
    app = FastAPI()
    bodies: list[dict[str, Any]] = []

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> dict[str, Any]:
        body = await request.json()
        bodies.append(body)
        reply = plan(body["messages"])
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if isinstance(reply, str):
            message: dict[str, Any] = {"role": "assistant", "content": reply}
        else:
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{turn}_{n}", "type": "function", "function": {"name": name, "arguments": args}}
                for n, (name, args) in enumerate(reply)]}
        return {"id": f"chatcmpl-{len(bodies)}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", "scripted"),
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "stop" if isinstance(reply, str) else "tool_calls"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}

    return app, bodies


def by_turn(replies: Sequence[list[tuple[str, str]] | str]) -> Plan:
    """The plan that answers the n-th assistant turn with `replies[n]`."""
    return lambda messages: replies[sum(1 for m in messages if m["role"] == "assistant")]


def tool_specs(env_id: str, **kwargs: Any) -> list[dict[str, Any]]:
    env = gym.make(env_id, **kwargs)
    try:
        return env.reset(seed=0)[1]["tools"]
    finally:
        env.close()


def test_native_tools_play_a_flights_episode_through_tool_calls_only():
    seed, actions = solved_seed("train")
    calls = [as_call(a) for a in actions]
    app, bodies = tool_call_model(by_turn([[(c["name"], json.dumps(c["arguments"]))] for c in calls]))
    with served() as url, AppServer(app) as model:
        expected = replay(url, FLIGHTS, seed, "train", actions)
        config = vf.resolve_env_config({"taskset": {
            "id": "agentrl-verifiers", "env_id": FLIGHTS, "base_url": url, "split": "train",
            "first_seed": seed, "num_tasks": 1, "native_tools": True}})
        episode = asyncio.run(one_rollout(vf.load_environment(config), model.url))
        after = counters(url)

    assert episode.ok, episode.errors
    [trace] = episode.traces
    assert sum(r for _, r, _ in expected) == 1.0 == trace.rewards["agentrl_reward"].score
    assert len(bodies) == len(actions)
    specs = tool_specs(FLIGHTS)
    assert all(body["tools"] == specs for body in bodies)  # every request offered the env's tools
    messages = bodies[-1]["messages"]
    # the task without the listing the request's `tools` replaces, then one tool message per call
    assert messages[0] == {"role": "user", "content": task_text(expected[0][0])}
    assert "# Tools" not in messages[0]["content"] and "# Tools" in expected[0][0]
    answers = [m for m in messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in answers] == [f"call_{n}_0" for n in range(len(actions) - 1)]
    assert [m["content"] for m in answers] == [tool_result(o) for o, _, _ in expected[1:-1]]
    assert not any(m["role"] == "user" for m in messages[1:])
    assert after.live == 0


@pytest.mark.parametrize("native", [True, False])
def test_bad_tool_calls_and_plain_replies_are_observations(native):
    """Echo-v0 in the eval process: a plain reply, an unknown tool and arguments that are not JSON
    are each answered with a clear observation, then the secret through `finish` earns Echo's 1."""

    def plan(messages: list[dict[str, Any]]) -> list[tuple[str, str]] | str:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        if turn == 0:
            return "I think the answer is obvious."
        if turn == 1:
            return [("book_everything", "{}"), ("echo", '{"text": "hi"'),
                    ("echo", '{"text": "</tool_call>"}')]
        secret = re.search(r"word '(\w+)'", messages[0]["content"])
        return [("finish", json.dumps({"answer": secret.group(1) if secret else ""}))]

    app, bodies = tool_call_model(plan)
    with AppServer(app) as model:
        config = vf.resolve_env_config({"taskset": {"id": "agentrl-verifiers", "env_id": "agentrl/Echo-v0",
                                                    "num_tasks": 1, "native_tools": native}})
        episode = asyncio.run(one_rollout(vf.load_environment(config), model.url))

    assert episode.ok, episode.errors
    assert episode.traces[0].rewards["agentrl_reward"].score == 1.0
    assert len(bodies) == 3
    assert all(("tools" in b) == native for b in bodies)
    if native:
        assert bodies[0]["tools"] == tool_specs("agentrl/Echo-v0")
    messages = bodies[-1]["messages"]
    first = messages[0]["content"]
    assert ("# Tools" in first) != native and "word '" in first
    assert messages[2]["role"] == "user" and messages[2]["content"].startswith("No tool call found")
    answers = {m["tool_call_id"]: json.loads(m["content"]) for m in messages if m["role"] == "tool"}
    assert answers["call_1_0"] == {"name": "book_everything",
                                   "error": "unknown tool 'book_everything'; available tools: echo, finish"}
    assert answers["call_1_1"]["name"] == "invalid_call"
    assert "arguments of 'echo' are not valid JSON" in answers["call_1_1"]["error"]
    assert answers["call_1_2"] == {"name": "echo", "content": "</tool_call>"}  # text that closes no block


def test_native_tools_serve_a_tau_airline_chat_customer():
    """TauAirline-v0 (τ²-bench's layout: its own tool list) with a chat-model customer: the gold's
    tool calls go through `tool_calls`, its closing message as a plain reply the customer reads. The
    customer's own requests carry no tools: τ-bench's airline customer has none."""
    from agentrl.tau_airline.env import TauAirlineEnv, gold_actions

    tasks = TauAirlineEnv(TAU_DATA).data.tasks
    index, actions = next((i, a) for i, t in enumerate(tasks) if len(a := gold_actions(t)) > 1
                          and a[0].startswith("<tool_call>") and not a[-1].startswith("<tool_call>"))
    agent = [[(c["name"], json.dumps(c["arguments"]))] for c in map(as_call, actions[:-1])]
    agent_plan = by_turn([*agent, actions[-1]])

    def plan(messages: list[dict[str, Any]]) -> list[tuple[str, str]] | str:
        if messages[0]["role"] == "system":  # the customer: an opening, then the end of the chat
            return STOP if any(m["role"] == "assistant" for m in messages) else "Hi, I need some help."
        return agent_plan(messages)

    app, bodies = tool_call_model(plan)
    with AppServer(app) as model:
        env_kwargs = {"data_dir": str(TAU_DATA), "user": "llm", "user_model": "customer",
                      "user_base_url": f"{model.url}/v1"}
        expected = replay_tau(env_kwargs, index, actions)
        del bodies[:]
        config = vf.resolve_env_config({"taskset": {
            "id": "agentrl-verifiers", "env_id": TAU, "env_kwargs": env_kwargs, "split": None,
            "options": {"task_index": index}, "num_tasks": 1, "native_tools": True}})
        episode = asyncio.run(one_rollout(vf.load_environment(config), model.url))

    assert episode.ok, episode.errors
    assert expected[-1][1] == 1.0 == episode.traces[0].rewards["agentrl_reward"].score
    customer = [b for b in bodies if b["model"] == "customer"]
    agent_bodies = [b for b in bodies if b["model"] != "customer"]
    assert len(customer) == 2 and not any("tools" in b for b in customer)
    specs = tool_specs(TAU, data_dir=str(TAU_DATA))
    assert specs != TauAirlineEnv.tool_specs()  # this layout offers fewer tools than the class defines
    assert len(agent_bodies) == len(actions) and all(b["tools"] == specs for b in agent_bodies)
    messages = agent_bodies[-1]["messages"]
    assert messages[0]["content"] == task_text(expected[0][0])
    assert messages[0]["content"].endswith("# Customer\nHi, I need some help.")
    answers = [m["content"] for m in messages if m["role"] == "tool"]
    assert answers == [tool_result(o) for o, _ in expected[1:-1]]
    assert customer[-1]["messages"][-1] == {"role": "user", "content": actions[-1]}  # the plain reply


def replay_tau(env_kwargs: dict[str, Any], index: int, actions: Sequence[str]) -> list[tuple[str, float]]:
    """(observation, reward) after reset and after each action of one in-process TauAirline-v0 episode."""
    env = gym.make(TAU, **env_kwargs)
    try:
        trace = [(env.reset(seed=0, options={"task_index": index})[0], 0.0)]
        trace += [(o, r) for o, r, *_ in map(env.step, actions)]
    finally:
        env.close()
    return trace
