"""The customer an agent serves (TauAirline-v0, and Flights-v0 with a customer): a fixed script
(tests) or any OpenAI-compatible chat model.

A user answers each message the agent sends to the customer; its reply becomes the next
observation, and a reply containing `STOP` (`###STOP###`, as in τ-bench) ends the conversation.
A user's whole state is plain data (its script position, or its chat so far), so a fork of an
episode deep-copies it and continues the same conversation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

STOP = "###STOP###"

DEFAULT_GUIDELINES = """\
You play a customer writing to an airline's customer service agent, following the instruction below.
- Write one short message at a time, as the customer would.
- Give only the information the agent needs for the current step; never the whole instruction at once.
- Never invent facts the instruction does not give (an id, a date, a number): say you do not know.
- Do not copy the instruction's wording; say it in your own words, in the character it describes.
- When the instruction's goal is reached, or cannot be, reply with only ###STOP### to end the chat."""


class UserModelError(RuntimeError):
    """The user model's endpoint failed or answered something that is not a chat completion."""


@dataclass
class ScriptedUser:
    """Replays `turns`: the first opens the conversation, each later one answers the agent's next
    message; once the script is spent, the customer ends the conversation."""

    turns: list[str]
    position: int = 0

    def opening(self, instruction: str) -> str:
        return self._next()

    def reply(self, message: str) -> str:
        return self._next()

    def _next(self) -> str:
        if self.position >= len(self.turns):
            return STOP
        self.position += 1
        return self.turns[self.position - 1]

    def settings(self) -> dict[str, Any]:
        return {"kind": "scripted", "turns": len(self.turns)}


@dataclass
class LLMUser:
    """A chat model playing the customer through an OpenAI-compatible `/chat/completions` endpoint.

    The model sees the guidelines and the task's instruction as its system message, the agent's
    messages as the other party's and its own replies as its own. `temperature` and `seed` go with
    every request (and into the episode's record): an endpoint that honours `seed` answers the
    same conversation the same way."""

    base_url: str
    model: str
    guidelines: str = DEFAULT_GUIDELINES
    temperature: float = 0.0
    seed: int | None = 0
    api_key: str | None = None
    timeout_s: float = 60.0
    max_reply_chars: int = 8_000
    chat: list[dict[str, str]] = field(default_factory=list)

    def opening(self, instruction: str) -> str:
        self.chat = [
            {"role": "system", "content": f"{self.guidelines}\n\nInstruction: {instruction}"},
            {"role": "user", "content": "Hi! How can I help you today?"},
        ]
        return self._complete()

    def reply(self, message: str) -> str:
        self.chat.append({"role": "user", "content": message})
        return self._complete()

    def _complete(self) -> str:
        body: dict[str, Any] = {"model": self.model, "messages": self.chat, "temperature": self.temperature}
        if self.seed is not None:
            body["seed"] = self.seed
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        url = self.base_url.rstrip("/") + "/chat/completions"
        try:
            response = httpx.post(url, json=body, headers=headers, timeout=self.timeout_s)
            response.raise_for_status()
            content = response.json()["choices"][0]["message"]["content"]
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise UserModelError(f"the user model at {url} failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(content, str):
            raise UserModelError(f"the user model at {url} answered no text: {content!r:.200}")
        content = content[: self.max_reply_chars]
        self.chat.append({"role": "assistant", "content": content})
        return content

    def settings(self) -> dict[str, Any]:
        return {"kind": "llm", "model": self.model, "base_url": self.base_url,
                "temperature": self.temperature, "seed": self.seed}
