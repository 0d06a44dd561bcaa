"""AReaL: `AgentrlWorkflow.arun_episode` plays Flights-v0 served on loopback through an inference
engine whose `agenerate` is scripted (AReaL's own `ModelRequest` in, `ModelResponse` out): the
oracle's calls on one seed, a refusal on another. The trajectory's ids and loss mask are agent-train's
for the same episode; its reward is the env's; every server-side episode is deleted."""

from __future__ import annotations

import asyncio

import pytest
from framework_helpers import END, SYSTEM, agent_train_transcript, scenario, spans, tokenizer_for
from integrations_helpers import FLIGHTS, counters, require, served

require("areal")

from areal.api import ModelRequest, ModelResponse, RolloutWorkflow  # noqa: E402
from areal.api.cli_args import GenerationHyperparameters  # noqa: E402

from agentrl.integrations.areal import AgentrlWorkflow  # noqa: E402

VERSION = 3


class ScriptedEngine:
    """AReaL's `InferenceEngine.agenerate`: prompt ids in, sampled ids with logprobs and versions out."""

    def __init__(self, tokenizer, plan) -> None:  # type: ignore[no-untyped-def]
        self.tokenizer, self.plan, self.calls = tokenizer, plan, 0

    async def agenerate(self, req: ModelRequest) -> ModelResponse:
        self.calls += 1
        assert req.gconfig.n_samples == 1 and self.tokenizer.eos_token_id in req.gconfig.stop_token_ids
        reply = self.plan.reply(self.tokenizer.decode(req.input_ids))
        ids = self.tokenizer.encode(reply + END, add_special_tokens=False)
        return ModelResponse(input_tokens=list(req.input_ids), output_tokens=ids,
                             output_logprobs=[-0.5] * len(ids), output_versions=[VERSION] * len(ids),
                             stop_reason="stop", tokenizer=self.tokenizer)


def test_workflow_plays_flights_and_its_loss_mask_is_agent_train_mask():
    with served() as url:
        plan = scenario(url)
        tokenizer = tokenizer_for(url, plan)
        workflow = AgentrlWorkflow(FLIGHTS, gconfig=GenerationHyperparameters(max_new_tokens=256),
                                   tokenizer=tokenizer, base_url=url, env_kwargs=plan.env_kwargs,
                                   system=SYSTEM)
        assert isinstance(workflow, RolloutWorkflow)
        engine = ScriptedEngine(tokenizer, plan)
        seeds = [plan.solved, plan.given_up]
        before = counters(url)

        async def rollouts():  # type: ignore[no-untyped-def]
            return await asyncio.gather(*(workflow.arun_episode(engine, {"seed": s, "split": "train"})
                                          for s in seeds))

        outputs = asyncio.run(rollouts())
        after = counters(url)
        transcripts = {s: agent_train_transcript(tokenizer, url, plan, s) for s in seeds}
        traces = {s: plan.trace(url, s) for s in seeds}

    assert engine.calls == len(plan.actions) + plan.max_turns
    assert after.created - before.created == 2 and after.closed - before.closed == 2 and after.live == 0
    for seed, out in zip(seeds, outputs, strict=True):
        assert out["input_ids"].shape[0] == 1
        ids, mask = out["input_ids"][0].tolist(), out["loss_mask"][0].tolist()
        assert ids == transcripts[seed].ids and mask == transcripts[seed].mask
        assert float(out["rewards"][0]) == pytest.approx(sum(r for _, r, _ in traces[seed]))
        assert float(out["rewards"][0]) == (1.0 if seed == plan.solved else 0.0)
        assert [tokenizer.decode(run) for run in spans(mask, ids, 1)] == [r + END for r in plan.replies(seed)]
        masked = "".join(tokenizer.decode(run) for run in spans(mask, ids, 0))
        assert all(o in masked for o, _, done in traces[seed] if not done)
        versions, logprobs = out["versions"][0].tolist(), out["logprobs"][0].tolist()
        assert versions == [VERSION if m else -1 for m in mask]
        assert logprobs == [-0.5 if m else 0.0 for m in mask]
        assert bool(out["attention_mask"].all())
