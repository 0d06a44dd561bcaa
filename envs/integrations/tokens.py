"""One agentrl episode as the token ids a model saw and produced, for trainers that train on ids
(verl, OpenRLHF, AReaL): the rule of agent-train's `Transcript`, shared by every such adapter.

The prompt is the chat template's rendering of the row's system messages and the env's first
observation; each generation is appended exactly as sampled (mask 1, its logprobs kept); each env
observation is appended as the text the chat template adds for it, encoded once (mask 0). The ids
are never re-tokenised from text, so what is trained is what the model saw. When the template
cannot extend the ids it already rendered (the transcript has drifted), the episode fails loudly
with `TokenDriftError` rather than hand a framework ids it would train on wrongly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentrl.agent_train.transcript import Transcript
from agentrl.core import StepResult
from agentrl.integrations.episode import AsyncRowEpisode, EnvSource


class TokenDriftError(RuntimeError):
    """The chat template no longer renders the transcript's ids as a prefix of the conversation."""


class TokenTranscript:
    """The token side of an episode: `start` -> prompt ids, `add_generation` -> the action text,
    `add_observation` for each env reply. `ids`/`mask`/`logprobs` cover the whole sequence;
    `prompt_ids` ends where the first generation starts and `response_*` are the rest (verl's and
    AReaL's split)."""

    def __init__(self, tokenizer: Any, *, tools: Sequence[Mapping[str, Any]] | None = None,
                 chat_template_kwargs: Mapping[str, Any] | None = None) -> None:
        self.transcript = Transcript(_TemplateKwargs(tokenizer, chat_template_kwargs or {}),
                                     tools=list(tools) if tools else None)
        self.prompt_length = 0
        self.turns = 0

    def start(self, observation: str, system: Sequence[Mapping[str, Any]] = ()) -> list[int]:
        """The prompt: `system` then the env's first observation as the user turn, rendered once."""
        self.transcript.start([*(dict(m) for m in system), {"role": "user", "content": observation}])
        self.prompt_length = len(self.transcript.ids)
        return self.ids

    def add_generation(self, generated: Sequence[int], logprobs: Sequence[float] | None = None) -> str:
        """Append the generated ids as sampled (mask 1); returns their text, the env's action."""
        ids = [int(i) for i in generated]
        sampled = [float(x) for x in logprobs] if logprobs is not None else [0.0] * len(ids)
        self.turns += 1
        return self.transcript.add_generation(ids, sampled, version=0)

    def add_observation(self, observation: str) -> list[int]:
        """Append the env's reply as the template renders it (mask 0); returns the ids added."""
        before = len(self.transcript.ids)
        if not self.transcript.add_env_message(observation):
            raise TokenDriftError(f"the chat template does not extend the episode's ids: "
                                  f"{self.transcript.drift}")
        return self.transcript.ids[before:]

    @property
    def ids(self) -> list[int]:
        return list(self.transcript.ids)

    @property
    def mask(self) -> list[int]:
        return list(self.transcript.mask)

    @property
    def logprobs(self) -> list[float]:
        return list(self.transcript.logprobs)

    @property
    def prompt_ids(self) -> list[int]:
        return self.transcript.ids[: self.prompt_length]

    @property
    def response_ids(self) -> list[int]:
        return self.transcript.ids[self.prompt_length:]

    @property
    def response_mask(self) -> list[int]:
        return self.transcript.mask[self.prompt_length:]

    @property
    def response_logprobs(self) -> list[float]:
        return self.transcript.logprobs[self.prompt_length:]


class TokenEpisode(TokenTranscript):
    """A `TokenTranscript` over an `AsyncRowEpisode` of `source`: `start` opens the row's episode,
    `act` appends a generation, steps the env with its text and appends the observation unless the
    step ended the episode; `close` deletes the server-side episode and the client it opened."""

    def __init__(self, source: EnvSource, tokenizer: Any, *, tools: Sequence[Mapping[str, Any]] | None = None,
                 chat_template_kwargs: Mapping[str, Any] | None = None) -> None:
        super().__init__(tokenizer, tools=tools, chat_template_kwargs=chat_template_kwargs)
        self.episode = AsyncRowEpisode.owning(source)

    async def open(self, row: Mapping[str, Any], system: Sequence[Mapping[str, Any]] = ()) -> list[int]:
        """Open the row's episode; returns the prompt ids."""
        return self.start(await self.episode.start(row), system)

    async def act(self, generated: Sequence[int], logprobs: Sequence[float] | None = None) -> StepResult:
        result = await self.episode.step(self.add_generation(generated, logprobs))
        if not self.episode.done:
            self.add_observation(result.observation)
        return result

    @property
    def done(self) -> bool:
        return self.episode.done

    @property
    def reward(self) -> float:
        return self.episode.reward

    async def close(self) -> None:
        """Delete the server-side episode, then the client; safe to call twice."""
        await self.episode.close()


class _TemplateKwargs:
    """A tokenizer whose `apply_chat_template` always gets the framework's template kwargs (verl's
    `apply_chat_template_kwargs`, e.g. `enable_thinking`), so every rendering of the transcript is
    the one the framework's own prompts use."""

    def __init__(self, tokenizer: Any, kwargs: Mapping[str, Any]) -> None:
        self._tokenizer, self._kwargs = tokenizer, dict(kwargs)

    def apply_chat_template(self, messages: Any, **kwargs: Any) -> Any:
        return self._tokenizer.apply_chat_template(messages, **{**self._kwargs, **kwargs})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)
