"""`agent-train sft`: oracle episodes, tokenized as rollouts are, lift a model GRPO then starts from."""

from __future__ import annotations

import asyncio
import json

import toy_env
from train_scripted import ScriptedBackend

from agentrl.agent_train.cli import main
from agentrl.agent_train.config import TrainConfig
from agentrl.agent_train.heldout import evaluate_policy
from agentrl.agent_train.rollout import RolloutLimits, Rollouts, driver_factory, run_episode
from agentrl.agent_train.sft import SFTConfig, sft, text_messages, tokenize_episode

TOY = toy_env.ENV_ID


def oracle_jsonl(path, cues=toy_env.CUES) -> None:
    with path.open("w") as f:
        for cue, colour in cues.items():
            messages = [
                {"role": "user", "content": toy_env.prompt(cue)},
                {"role": "assistant", "content": colour},
            ]
            f.write(json.dumps({"messages": messages}) + "\n")


def test_an_oracle_episode_gets_the_ids_and_mask_a_rollout_of_it_gets(toy_tokenizer):
    backend = ScriptedBackend(toy_tokenizer, ["blue"])
    spec = Rollouts(driver_factory(TOY), backend, toy_tokenizer, RolloutLimits(8, 128))
    rollout = asyncio.run(run_episode(spec, seed=2)).transcript  # seed 2: "sky?"
    sft_t = tokenize_episode(
        toy_tokenizer, [{"role": "user", "content": "sky?"}, {"role": "assistant", "content": "blue"}]
    )
    assert sft_t.ids == rollout.ids and sft_t.mask == rollout.mask and sum(sft_t.mask) > 0


def test_tool_call_episodes_from_the_demo_export_become_text_turns():
    call = {"id": "c0", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}
    episode = {
        "messages": [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c0", "name": "search", "content": "found"},
        ]
    }
    assert text_messages(episode) == [
        {"role": "user", "content": "task"},
        {
            "role": "assistant",
            "content": '<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>',
        },
        {"role": "user", "content": "<tool_response>\nfound\n</tool_response>"},
    ]


def test_sft_lifts_success_and_grpo_starts_from_its_checkpoint(tmp_path, toy_model, toy_tokenizer):
    data = tmp_path / "oracle.jsonl"
    oracle_jsonl(data)
    cfg = TrainConfig(
        env=TOY,
        max_new_tokens=6,
        token_budget=128,
        eval_seeds=16,
        eval_k=4,
        progress=False,
        out_dir=str(tmp_path),
    )
    before = evaluate_policy(cfg, toy_model, toy_tokenizer, log=lambda *_: None)["scores"]["eval_success"]
    result = sft(
        SFTConfig(
            data=str(data), out_dir=str(tmp_path / "sft"), epochs=60, lr=3e-3, micro_batch=4, progress=False
        ),
        policy=toy_model,
        tokenizer=toy_tokenizer,
        log=lambda *_: None,
    )
    after = evaluate_policy(cfg, toy_model, toy_tokenizer, log=lambda *_: None)["scores"]["eval_success"]
    assert before < 0.3 and after > 0.8, (before, after)
    losses = [r["sft_loss"] for r in result["metrics"]]
    assert losses[-1] < losses[0] / 4
    # `agent-train --model <sft checkpoint>` runs GRPO from it
    argv = ["--env", TOY, "--model", result["checkpoint"], "--steps", "1", "--groups-per-step", "4"]
    argv += ["--group-size", "4", "--max-new-tokens", "6", "--token-budget", "128", "--eval-seeds", "8"]
    argv += ["--no-progress", "--no-tensorboard", "--no-plot", "--out-dir", str(tmp_path / "grpo")]
    argv += ["--zero-variance", "keep"]
    assert main(argv) == 0
    run = json.loads((tmp_path / "grpo" / "config.json").read_text())
    assert run["model"] == result["checkpoint"]
    assert (tmp_path / "grpo" / "checkpoint-1" / "model.safetensors").exists()


def test_the_sft_command_writes_a_checkpoint(tmp_path, toy_model, toy_tokenizer, capsys):
    folder = tmp_path / "model"
    toy_model.save_pretrained(folder)
    toy_tokenizer.save_pretrained(folder)
    data = tmp_path / "oracle.jsonl"
    oracle_jsonl(data)
    argv = [
        "sft",
        "--data",
        str(data),
        "--model",
        str(folder),
        "--out-dir",
        str(tmp_path / "sft"),
        "--epochs",
        "1",
    ]
    assert main([*argv, "--no-progress"]) == 0
    assert '"checkpoint"' in capsys.readouterr().out
    assert (tmp_path / "sft" / "checkpoint" / "model.safetensors").exists()


def test_a_step_in_passes_equals_one_pass(toy_model, toy_tokenizer):
    """`pass_tokens` bounds a backward pass's memory, not what the step computes: the same batch in
    one pass or in one pass per episode gives the same loss, token count and gradients."""
    import copy

    import torch

    from agentrl.agent_train.sft import sft_step
    from agentrl.agent_train.update import token_passes

    batch = [tokenize_episode(toy_tokenizer, [{"role": "user", "content": toy_env.prompt(cue)},
                                              {"role": "assistant", "content": colour}])
             for cue, colour in toy_env.CUES.items()]
    longest = max(len(t.ids) for t in batch)
    lengths = [len(t.ids) for t in batch]
    assert [p.stop - p.start for p in token_passes(lengths, longest)] == [1] * len(batch)
    assert len(token_passes(lengths, longest * len(batch))) == 1

    def step(pass_tokens: int) -> tuple[float, int, list[torch.Tensor]]:
        model = copy.deepcopy(toy_model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # the gradients stay to be read
        loss, tokens = sft_step(model, optimizer, batch, toy_tokenizer.pad_token_id, 1e9, "cpu", pass_tokens)
        return loss, tokens, [p.grad.clone() for p in model.parameters() if p.grad is not None]

    whole, apart = step(longest * len(batch)), step(1)
    assert whole[1] == apart[1] > 0 and abs(whole[0] - apart[0]) < 1e-5
    assert len(whole[2]) == len(apart[2]) > 0
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(whole[2], apart[2], strict=True))
