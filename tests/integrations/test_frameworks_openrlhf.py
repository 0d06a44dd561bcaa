"""OpenRLHF: the agent file (`--train.agent_func_path`) is loaded as OpenRLHF's rollout actor loads
it and its `AgentExecutor.execute` plays Flights-v0 served on loopback. The vLLM engine is replaced by
a scripted one (token ids in, a vLLM-shaped output out) that plays the oracle's calls on one seed and
refuses on another. OpenRLHF's loader and its experience maker live in modules that import vLLM,
which has no CPU build here: the test does what they do (import the file, build `AgentExecutor()`;
an action mask of 1 over `action_ranges`), in a few lines."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import textwrap
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from framework_helpers import END, agent_train_transcript, scenario, spans, tokenizer_for
from integrations_helpers import FLIGHTS, counters, require, served

require("openrlhf")

from openrlhf.utils.agent import AgentExecutorBase  # noqa: E402

from agentrl.integrations.openrlhf import episode_row  # noqa: E402


@dataclass
class SamplingParams:
    """The two fields of vLLM's `SamplingParams` an agent executor reads and writes."""

    max_tokens: int | None = None
    logprobs: int | None = 1


class ScriptedEngine:
    """The rollout actor's `generate(prompt_token_ids, sampling_params)`: a vLLM `RequestOutput` shape."""

    def __init__(self, tokenizer, plan) -> None:  # type: ignore[no-untyped-def]
        self.tokenizer, self.plan, self.calls = tokenizer, plan, 0

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):  # type: ignore[no-untyped-def]
        self.calls += 1
        assert sampling_params.max_tokens == 100_000 - len(prompt_token_ids)
        reply = self.plan.reply(self.tokenizer.decode(prompt_token_ids))
        ids = self.tokenizer.encode(reply + END, add_special_tokens=False)
        logprobs = [{t: SimpleNamespace(logprob=-0.25)} for t in ids]
        return SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids, text=reply, finish_reason="stop",
                                                        logprobs=logprobs)])


def load_agent_file(path) -> AgentExecutorBase:  # type: ignore[no-untyped-def]
    """What OpenRLHF's `_load_agent_executor` does with `agent_func_path`."""
    spec = importlib.util.spec_from_file_location("agent_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert issubclass(module.AgentExecutor, AgentExecutorBase)
    return module.AgentExecutor()


def test_agent_file_plays_flights_and_its_action_ranges_are_agent_train_mask(tmp_path):
    with served() as url:
        plan = scenario(url)
        tokenizer = tokenizer_for(url, plan)
        agent_file = tmp_path / "agentrl_agent.py"
        agent_file.write_text(textwrap.dedent(f"""
            from agentrl.integrations.openrlhf import agent_executor
            AgentExecutor = agent_executor({FLIGHTS!r}, base_url={url!r}, env_kwargs={plan.env_kwargs!r})
        """))
        executor = load_agent_file(agent_file)
        engine = ScriptedEngine(tokenizer, plan)
        seeds = [plan.solved, plan.given_up]
        before = counters(url)

        async def rollouts():  # type: ignore[no-untyped-def]
            return await asyncio.gather(*(
                executor.execute(prompt="(the env's task)", label=json.dumps({"seed": s, "split": "train"}),
                                 sampling_params=SamplingParams(), max_length=100_000, hf_tokenizer=tokenizer,
                                 llm_engine=engine) for s in seeds))

        outputs = asyncio.run(rollouts())
        after = counters(url)
        transcripts = {s: agent_train_transcript(tokenizer, url, plan, s, system=()) for s in seeds}
        traces = {s: plan.trace(url, s) for s in seeds}

    assert engine.calls == len(plan.actions) + plan.max_turns
    assert after.created - before.created == 2 and after.closed - before.closed == 2 and after.live == 0
    for seed, out in zip(seeds, outputs, strict=True):
        expected_reward = sum(r for _, r, _ in traces[seed])
        assert out["reward"] == out["scores"] == expected_reward == (1.0 if seed == plan.solved else 0.0)
        ids = out["observation_tokens"]
        mask = [0] * len(ids)
        for start, end in out["action_ranges"]:
            mask[start:end] = [1] * (end - start)
        assert ids == transcripts[seed].ids and mask == transcripts[seed].mask
        assert [tokenizer.decode(run) for run in spans(mask, ids, 1)] == [r + END for r in plan.replies(seed)]
        masked = "".join(tokenizer.decode(run) for run in spans(mask, ids, 0))
        assert all(o in masked for o, _, done in traces[seed] if not done)
        assert [lp for lp, m in zip(out["rollout_log_probs"], mask, strict=True) if m] == [-0.25] * sum(mask)
        assert out["truncated"] is False and out["extra_logs"] == {"agentrl_done": 1.0}


def test_labels_are_checked():
    assert episode_row('{"seed": 3, "split": "test"}') == {"seed": 3, "split": "test"}
    assert episode_row({"seed": 1}) == {"seed": 1} and episode_row(None) == {}
    with pytest.raises(ValueError, match="JSON"):
        episode_row("seed 3")
    with pytest.raises(ValueError, match="mapping"):
        episode_row("[3]")
