"""TRL: GRPOTrainer trains a tiny random model on Flights-v0 served on loopback, through
`environment_factory`. Generation is scripted, as in TRL's own tests: the first rollout of the group
plays the oracle's tool calls, the second answers in plain text and leaves the episode unfinished."""

from __future__ import annotations

import inspect
import json

import httpx
import pytest
from integrations_helpers import FLIGHTS, as_call, counters, replay, require, served, solved_seed

trl = require("trl")
torch = require("torch")

from datasets import Dataset  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM  # noqa: E402
from transformers.utils import get_json_schema  # noqa: E402
from trl.chat_template_utils import qwen3_chat_template  # noqa: E402

from agentrl.integrations.trl import dataset_rows, environment_factory, tool_method  # noqa: E402

SPECIAL = ["<|im_start|>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
           "<think>", "</think>"]
GIVE_UP = "I cannot help with that."


def tiny_tokenizer(corpus: list[str]) -> PreTrainedTokenizerFast:
    """A byte-level BPE learnt from `corpus` in milliseconds (any text still round-trips exactly),
    with Qwen3's chat template; merges keep sequences, and so attention on CPU, short."""
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=3000, special_tokens=[*SPECIAL, "<|im_end|>", "<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>", additional_special_tokens=SPECIAL)
    tokenizer.chat_template = qwen3_chat_template
    return tokenizer


def tiny_model(tokenizer: PreTrainedTokenizerFast) -> Qwen3ForCausalLM:
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                         max_position_embeddings=32768, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    return Qwen3ForCausalLM(config)


def scripted_generation(tokenizer, calls):  # type: ignore[no-untyped-def]
    """Stands in for `GRPOTrainer._generate_single_turn`: even rollouts make `calls` in order (one
    per turn, then a plain reply), odd rollouts reply in plain text at once."""

    def generate(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):  # type: ignore[no-untyped-def]
        completions = []
        for i, ids in enumerate(prompt_ids):
            turns_done = tokenizer.decode(ids).count("<|im_start|>assistant") - 1
            if (turns_done == 0 and i % 2 == 1) or turns_done >= len(calls):
                reply = GIVE_UP
            else:
                reply = "<tool_call>\n" + json.dumps(calls[turns_done]) + "\n</tool_call>"
            completions.append(tokenizer(reply + "<|im_end|>", add_special_tokens=False)["input_ids"])
        return completions, None

    return generate


@pytest.mark.slow
def test_grpo_trains_one_step_on_flights_served_on_loopback(tmp_path, monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    seed, actions = solved_seed("train")
    calls = [as_call(a) for a in actions]
    with served() as url:
        expected = replay(url, FLIGHTS, seed, "train", actions)
        oracle_reward = sum(r for _, r, _ in expected)
        assert oracle_reward == 1.0 and expected[-1][2]
        tokenizer = tiny_tokenizer([o for o, _, _ in expected] + [qwen3_chat_template, *actions])
        model = tiny_model(tokenizer)
        before = {name: p.detach().clone() for name, p in model.named_parameters()}
        at_start = counters(url)
        args = trl.GRPOConfig(
            output_dir=str(tmp_path), per_device_train_batch_size=2, num_generations=2, max_steps=1,
            max_completion_length=8192, learning_rate=0.05, beta=0.0, report_to="none", logging_steps=1,
            use_cpu=True, save_strategy="no", max_tool_calling_iterations=len(calls) + 2, seed=0,
        )
        trainer = trl.GRPOTrainer(
            model=model, args=args, processing_class=tokenizer,
            train_dataset=Dataset.from_list(dataset_rows([seed], split="train")),
            environment_factory=environment_factory(FLIGHTS, base_url=url),
        )
        monkeypatch.setattr(trainer, "_generate_single_turn", scripted_generation(tokenizer, calls))
        trainer.train()
        seen = counters(url)

    logged = trainer.state.log_history[0]
    [reward_key] = [k for k in logged if k.startswith("rewards/") and k.endswith("/mean")]
    # the oracle rollout earns the env's reward, the plain-text one leaves its episode unpaid
    assert logged[reward_key] == pytest.approx((oracle_reward + 0.0) / 2)
    assert logged["tools/call_frequency"] > 0 and logged["tools/failure_frequency"] == 0
    assert seen.created - at_start.created >= 2  # one episode per rollout
    assert seen.steps - at_start.steps == len(calls)
    assert seen.closed - at_start.closed == seen.created - at_start.created
    assert seen.live == 0  # nothing leaked
    assert any(not torch.equal(before[name], p) for name, p in model.named_parameters())


def test_tool_methods_carry_the_env_schema_for_the_chat_template():
    spec = {"type": "function", "function": {
        "name": "book", "description": "Book a seat.",
        "parameters": {"type": "object", "required": ["flight_id", "passengers"], "properties": {
            "flight_id": {"type": "integer", "description": "Flight to book."},
            "passengers": {"type": "array", "items": {"type": "string"}, "description": "Passenger ids."},
            "cabin": {"enum": ["economy", "business"], "description": "Cabin."},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "A note."},
        }}}}
    method = tool_method(spec)
    schema = get_json_schema(method)["function"]
    assert schema["name"] == "book" and schema["description"] == "Book a seat."
    params = schema["parameters"]
    assert params["required"] == ["flight_id", "passengers"]
    assert params["properties"]["flight_id"]["type"] == "integer"
    assert params["properties"]["passengers"] == {"type": "array", "items": {"type": "string"},
                                                  "description": "Passenger ids."}
    assert params["properties"]["cabin"]["enum"] == ["economy", "business"]
    assert params["properties"]["note"]["type"] == "string"
    assert list(inspect.signature(method).parameters) == ["self", "flight_id", "passengers", "cabin", "note"]


def test_every_flights_tool_becomes_a_method_and_calls_reach_the_env():
    seed, actions = solved_seed("train")
    first = as_call(actions[0])
    env = environment_factory(FLIGHTS)()
    task = env.reset(seed=seed, split="train", prompt=[])
    assert task and "# Tools" not in task  # the chat template lists the tools, not the task text
    for spec in env._episode.info["tools"]:
        method = getattr(env, spec["function"]["name"])
        assert get_json_schema(method)["function"]["name"] == spec["function"]["name"]
    result = getattr(env, first["name"])(**first["arguments"])
    assert json.loads(result)["name"] == first["name"]
    bad = getattr(env, first["name"])(**{k: None for k in first["arguments"]})
    assert "error" in json.loads(bad)  # a missing argument is the env's error message, not a crash
    assert env.get_reward() == 0.0


def test_bad_rows_and_tool_names_are_refused_clearly():
    env = environment_factory(FLIGHTS)()
    with pytest.raises(ValueError, match="seed"):
        env.reset(seed=-1)
    with pytest.raises(ValueError, match="split"):
        env.reset(seed=0, split="validation")
    with pytest.raises(ValueError, match="cannot be a Python"):
        tool_method({"function": {"name": "get-reward", "parameters": {}}})
    with pytest.raises(ValueError, match="cannot be a Python"):
        tool_method({"function": {"name": "reset", "parameters": {}}})


def test_a_lost_server_fails_the_reward_loudly():
    seed, actions = solved_seed("train")
    first = as_call(actions[0])
    with served() as url:
        env = environment_factory(FLIGHTS, base_url=url)()
        env.reset(seed=seed, split="train")
    with pytest.raises(httpx.HTTPError):  # TRL shows this to the model as the tool's error...
        getattr(env, first["name"])(**first["arguments"])
    with pytest.raises(RuntimeError, match="outside the env"):  # ...and the reward raises it again
        env.get_reward()
