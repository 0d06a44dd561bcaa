"""verl: its own `AgentLoopWorker.generate_sequences` runs `AgentrlAgentLoop` (from an agent-loop
config file, as in training) on Flights-v0 served on loopback. verl's server manager is replaced by a
scripted generator (token ids in, ids out) that plays the oracle's calls on one seed and refuses on
another; the worker itself, its registry, hydra instantiation and padding are verl's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
import yaml
from framework_helpers import END, SYSTEM, agent_train_transcript, scenario, spans, tokenizer_for
from integrations_helpers import FLIGHTS, counters, require, served

verl = require("verl")

from omegaconf import OmegaConf  # noqa: E402
from transformers import Qwen3Config  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker  # noqa: E402
from verl.protocol import DataProto  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from agentrl.integrations.verl import agent_loop_config  # noqa: E402

LENGTH = 16384


class ScriptedServerManager:
    """verl's `LLMServerClient.generate` contract: prompt ids in, a `TokenOutput` of new ids out."""

    def __init__(self, tokenizer, plan) -> None:  # type: ignore[no-untyped-def]
        self.tokenizer, self.plan, self.calls = tokenizer, plan, 0

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):  # type: ignore[no-untyped-def]
        self.calls += 1
        reply = self.plan.reply(self.tokenizer.decode(prompt_ids))
        ids = self.tokenizer.encode(reply + END, add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


def worker_config(model_dir: Path, loops_file: Path):  # type: ignore[no-untyped-def]
    config = OmegaConf.load(Path(verl.__file__).parent / "trainer/config/_generated_ppo_trainer.yaml")
    config.actor_rollout_ref.model.path = str(model_dir)
    config.actor_rollout_ref.rollout.name = "vllm"  # which server verl would start; none is started here
    config.actor_rollout_ref.rollout.prompt_length = LENGTH
    config.actor_rollout_ref.rollout.response_length = LENGTH
    config.actor_rollout_ref.rollout.calculate_log_probs = True
    config.actor_rollout_ref.rollout.agent.agent_loop_config_path = str(loops_file)
    return config


def test_agent_loop_worker_plays_flights_and_masks_every_observation_token(tmp_path):
    with served() as url:
        plan = scenario(url)
        tokenizer = tokenizer_for(url, plan)
        tokenizer.save_pretrained(tmp_path / "model")
        Qwen3Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                    num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                    architectures=["Qwen3ForCausalLM"]).save_pretrained(tmp_path / "model")
        loops_file = tmp_path / "agentrl_agent.yaml"
        loops_file.write_text(yaml.safe_dump([agent_loop_config("agentrl_flights", FLIGHTS, base_url=url,
                                                                env_kwargs=plan.env_kwargs)]))
        manager = ScriptedServerManager(tokenizer, plan)
        worker = AgentLoopWorker(worker_config(tmp_path / "model", loops_file), llm_client=manager)
        seeds = [plan.solved, plan.given_up]
        batch = DataProto.from_dict(non_tensors={
            "agent_name": np.array(["agentrl_flights"] * 2, dtype=object),
            "raw_prompt": np.array([SYSTEM, SYSTEM], dtype=object),
            "extra_info": np.array([{"seed": s, "split": "train"} for s in seeds], dtype=object),
            "index": np.array([0, 1]),
        })
        before = counters(url)
        out = asyncio.run(worker.generate_sequences(batch))
        after = counters(url)
        expected = {s: agent_train_transcript(tokenizer, url, plan, s) for s in seeds}
        traces = {s: plan.trace(url, s) for s in seeds}
        rewards = {s: sum(r for _, r, _ in traces[s]) for s in seeds}

    assert rewards == {plan.solved: 1.0, plan.given_up: 0.0}
    assert manager.calls == len(plan.actions) + plan.max_turns
    # every episode the loops opened is closed
    assert after.created - before.created == 2 and after.closed - before.closed == 2 and after.live == 0
    for row, seed in enumerate(seeds):
        transcript = expected[seed]
        prompt = out.batch["prompts"][row][out.batch["attention_mask"][row][:LENGTH].bool()].tolist()
        width = int(out.batch["attention_mask"][row][LENGTH:].sum())
        response = out.batch["responses"][row][:width].tolist()
        mask = out.batch["response_mask"][row][:width].tolist()
        # verl's tensors hold agent-train's ids and mask for the same episode, token for token
        assert prompt + response == transcript.ids
        assert [0] * len(prompt) + mask == transcript.mask
        assert int(out.batch["response_mask"][row][width:].sum()) == 0
        # trained: exactly the replies as generated; masked: everything the env and template added
        replies = [tokenizer.decode(run) for run in spans(mask, response, 1)]
        assert replies == [r + END for r in plan.replies(seed)][: len(replies)]
        masked = "".join(tokenizer.decode(run) for run in spans(mask, response, 0))
        observations = [o for o, _, done in traces[seed][1:] if not done]
        assert observations and all(o in masked for o in observations)
        # the env's reward is verl's token-level score, on the last response token
        assert float(out.batch["rm_scores"][row].sum()) == pytest.approx(rewards[seed])
        assert float(out.batch["rm_scores"][row][width - 1]) == pytest.approx(rewards[seed])
        logprobs = out.batch["rollout_log_probs"][row][:width].tolist()
        assert [lp for lp, m in zip(logprobs, mask, strict=True) if m] == [-0.5] * sum(mask)
    assert list(out.non_tensor_batch["agentrl_done"]) == [True, True]
