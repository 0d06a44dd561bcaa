"""Token-in/token-out transcripts: the ids the model saw and sampled, never a re-tokenized copy.

Each turn's prompt is the previous ids plus the environment's new message rendered with the
model's chat template and appended as ids. Generated ids are kept exactly as sampled, with their
sampling logprobs and the policy version that produced them. The loss mask comes from where each
id came from (1 sampled, 0 environment/template), never from pad ids.

The rendering of an env message is the text the chat template adds for it: the canonical
rendering of the whole conversation minus the text the ids already decode to. If the ids do not
decode to a prefix of that canonical rendering (a template that trims content, a decode that is
not the inverse of encode...), the transcript has drifted from what a re-render would give; it is
flagged and the sample is excluded from training rather than trained on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


def render(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    add_generation_prompt: bool,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> str:
    return tokenizer.apply_chat_template(
        messages, tools=tools, tokenize=False, add_generation_prompt=add_generation_prompt
    )


def encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


@dataclass
class Transcript:
    """One episode's token stream with per-token provenance."""

    tokenizer: Any
    tools: Sequence[Mapping[str, Any]] | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)  # 1 = sampled by the policy, 0 = env or template
    logprobs: list[float] = field(default_factory=list)  # sampling logprob; 0.0 where mask is 0
    versions: list[int] = field(default_factory=list)  # policy version per token; -1 where mask is 0
    drift: str | None = None  # why the transcript stopped being prefix-consistent, if it did

    # ------------------------------------------------------------------------------------------
    def start(self, messages: list[dict[str, Any]]) -> None:
        """Begin with the initial messages (system/user), ending in the generation prompt."""
        self.messages = [dict(m) for m in messages]
        text = render(self.tokenizer, self.messages, add_generation_prompt=True, tools=self.tools)
        self._append_env(encode(self.tokenizer, text))

    def add_generation(self, ids: list[int], logprobs: list[float], version: int) -> str:
        """Append sampled ids as they are; return the assistant text the env receives as its action."""
        if len(ids) != len(logprobs):
            raise ValueError("one logprob per generated id is required")
        self.ids.extend(ids)
        self.mask.extend([1] * len(ids))
        self.logprobs.extend(float(x) for x in logprobs)
        self.versions.extend([version] * len(ids))
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        self.messages.append({"role": "assistant", "content": text})
        return text

    def add_env_message(self, content: str, role: str = "user") -> bool:
        """Append the env's reply rendered by the chat template; False (and `drift` set) on inconsistency."""
        self.messages.append({"role": role, "content": content})
        canonical = render(self.tokenizer, self.messages, add_generation_prompt=True, tools=self.tools)
        have = self.decoded()
        if not canonical.startswith(have):
            self.drift = _describe_drift(have, canonical)
            return False
        self._append_env(encode(self.tokenizer, canonical[len(have) :]))
        return True

    def check(self) -> bool:
        """Whole-transcript prefix consistency: the ids decode to a prefix of the canonical rendering."""
        if self.drift is not None:
            return False
        awaiting_reply = bool(self.messages) and self.messages[-1]["role"] != "assistant"
        canonical = render(
            self.tokenizer, self.messages, add_generation_prompt=awaiting_reply, tools=self.tools
        )
        have = self.decoded()
        if not canonical.startswith(have):
            self.drift = _describe_drift(have, canonical)
            return False
        return True

    # ------------------------------------------------------------------------------------------
    def decoded(self) -> str:
        return self.tokenizer.decode(self.ids, skip_special_tokens=False)

    def retokenization_mismatch(self) -> int:
        """How many ids differ from encoding the decoded text again (what a re-tokenizer trains on)."""
        again = encode(self.tokenizer, self.decoded())
        same = sum(1 for a, b in zip(again, self.ids, strict=False) if a == b)
        return max(len(again), len(self.ids)) - same

    @property
    def generated_tokens(self) -> int:
        return sum(self.mask)

    def _append_env(self, ids: list[int]) -> None:
        self.ids.extend(ids)
        self.mask.extend([0] * len(ids))
        self.logprobs.extend([0.0] * len(ids))
        self.versions.extend([-1] * len(ids))


def _describe_drift(have: str, canonical: str) -> str:
    at = next(
        (i for i, (a, b) in enumerate(zip(have, canonical, strict=False)) if a != b),
        min(len(have), len(canonical)),
    )
    return (
        f"ids decode to {have[at : at + 40]!r} at char {at}; the template renders {canonical[at : at + 40]!r}"
    )
