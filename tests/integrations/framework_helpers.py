"""What the framework-adapter tests share (a uniquely named module: pytest puts test folders on
sys.path): a tiny ChatML tokenizer, the scripted model that plays the Flights-v0 oracle on one seed
and gives up on another, and the token transcript agent-train builds for the same episode."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gymnasium as gym
from integrations_helpers import FLIGHTS, solved_seed
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from agentrl.agent_train.transcript import Transcript

CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
END = "<|im_end|>"
GIVE_UP = "I cannot help with that."
SYSTEM = [{"role": "system", "content": "You are a travel agent."}]


def tiny_tokenizer(corpus: Sequence[str]) -> PreTrainedTokenizerFast:
    """A byte-level BPE learnt from `corpus` in milliseconds (any text still round-trips), with a
    ChatML template; merges keep the Flights-v0 observations short."""
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=3000, special_tokens=["<|im_start|>", END, "<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token=END, pad_token="<|endoftext|>")
    tokenizer.chat_template = CHATML
    return tokenizer


@dataclass(frozen=True)
class Scenario:
    """Two Flights-v0 episodes on the train split: `solved` (the oracle's calls, reward 1) and
    `given_up` (a plain-text refusal every turn, reward 0). The env's `max_turns` ends the refusal."""

    solved: int
    given_up: int
    actions: tuple[str, ...]
    first_observations: dict[int, str]

    @property
    def max_turns(self) -> int:
        return len(self.actions) + 1

    @property
    def env_kwargs(self) -> dict[str, int]:
        return {"max_turns": self.max_turns}

    def replies(self, seed: int) -> list[str]:
        return list(self.actions) if seed == self.solved else [GIVE_UP] * self.max_turns

    def reply(self, prompt_text: str) -> str:
        """The scripted model's next reply, from the conversation so far (its task names the seed)."""
        [seed] = [s for s, first in self.first_observations.items() if first in prompt_text]
        turn = prompt_text.count("<|im_start|>assistant") - 1
        return self.replies(seed)[turn]

    def trace(self, url: str, seed: int) -> list[tuple]:
        """(observation, reward, done) of the episode played on a fresh env of the server."""
        env = gym.make(FLIGHTS, base_url=url, **self.env_kwargs)
        observation, _ = env.reset(seed=seed, options={"split": "train"})
        trace = [(observation, 0.0, False)]
        for action in self.replies(seed):
            observation, reward, terminated, truncated, _ = env.step(action)
            trace.append((observation, float(reward), terminated or truncated))
            if terminated or truncated:
                break
        env.close()
        return trace


def scenario(url: str) -> Scenario:
    seed, actions = solved_seed("train")
    plan = Scenario(seed, seed + 1, actions, {})
    firsts = {s: plan.trace(url, s)[0][0] for s in (plan.solved, plan.given_up)}
    return Scenario(seed, seed + 1, actions, firsts)


def tokenizer_for(url: str, plan: Scenario) -> PreTrainedTokenizerFast:
    corpus = [o for s in (plan.solved, plan.given_up) for o, _, _ in plan.trace(url, s)]
    return tiny_tokenizer([*corpus, *plan.actions, GIVE_UP, CHATML])


def agent_train_transcript(tokenizer, url: str, plan: Scenario, seed: int,  # type: ignore[no-untyped-def]
                           system: Sequence[dict] = SYSTEM) -> Transcript:
    """agent-train's own token transcript of the same episode, built here from the env's trace."""
    trace = plan.trace(url, seed)
    transcript = Transcript(tokenizer)
    transcript.start([*system, {"role": "user", "content": trace[0][0]}])
    for reply, (observation, _, done) in zip(plan.replies(seed), trace[1:], strict=False):
        ids = tokenizer.encode(reply + END, add_special_tokens=False)
        transcript.add_generation(ids, [0.0] * len(ids), version=0)
        if done:
            break
        assert transcript.add_env_message(observation)
    return transcript


def spans(mask: Sequence[int], ids: Sequence[int], value: int) -> list[list[int]]:
    """The runs of `ids` where `mask` is `value`, in order."""
    runs: list[list[int]] = []
    for i, (m, t) in enumerate(zip(mask, ids, strict=True)):
        if m == value:
            if i == 0 or mask[i - 1] != value:
                runs.append([])
            runs[-1].append(t)
    return runs
