"""What every framework adapter does with an agentrl env: start an episode from a dataset row, step
it with the model's text, keep its reward, and end the server-side episode when the rollout ends.

`RowEpisode` is synchronous (TRL and SkyRL call envs from plain threads); `AsyncRowEpisode` runs in an
event loop (verifiers). Both are the episode driver's (`agentrl.driver`) with a dataset row's way
in: locally a `gym.make` env, remotely the same id on `agentrl serve`, through `RemoteEnv` (sync,
over one client per server and process) or `AsyncEnvClient` (async).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import agentrl  # noqa: F401  (registers the env ids)
from agentrl import driver
from agentrl.core.tool_calls import task_text
from agentrl.core.tools import TOOL_RESPONSE
from agentrl.driver import EnvSource

__all__ = ["AsyncRowEpisode", "EnvSource", "EpisodeStart", "RowEpisode", "task_text", "tool_result"]

SPLITS = ("train", "test")


@dataclass(frozen=True)
class EpisodeStart:
    """Which episode a dataset row asks for: `seed`, `split` ("train"/"test") and reset `options`."""

    seed: int | None = None
    split: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> EpisodeStart:
        """Read the row's `seed`, `split` and `options`; other columns (the prompt...) are ignored."""
        seed, split, options = row.get("seed"), row.get("split"), row.get("options") or {}
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ValueError(f"a row's seed must be a non-negative int, got {seed!r}")
        if split is not None and split not in SPLITS:
            raise ValueError(f"a row's split must be one of {SPLITS}, got {split!r}")
        if not isinstance(options, Mapping):
            raise ValueError(f"a row's options must be a mapping, got {type(options).__name__}")
        return cls(seed, split, dict(options))

    def reset_options(self) -> dict[str, Any] | None:
        """`options` for `env.reset`: the row's, with its split (COMMON contract: envs take `split`)."""
        options = dict(self.options)
        if self.split is not None:
            options["split"] = self.split
        return options or None


class RowEpisode(driver.Episode):
    """One env of `source`, played episode after episode: `start` from a row, `step`, then `release`.

    `reward` is the sum of what the env paid since `start`; an episode the framework stopped before
    the env ended it keeps what it was paid so far. `release` deletes the server-side episode (a
    local env has nothing to free between episodes); `start` opens a new one.
    """

    def __init__(self, source: EnvSource) -> None:
        self.source = source
        super().__init__(source.make())
        self._remote = self.remote

    def start(self, row: Mapping[str, Any]) -> str:
        """Reset to the row's episode; returns the first observation (`info` is kept on `self.info`)."""
        begin = EpisodeStart.from_row(row)
        return self.begin(begin.seed, begin.reset_options())

    def release(self) -> None:
        """End the server-side episode now (no-op in-process); the next `start` opens a new one."""
        self.forced_done = True
        if self._remote:
            self.env.close()  # the shared client stays open: RemoteEnv only closes a client it owns


class AsyncRowEpisode(driver.AsyncEpisode):
    """`RowEpisode` for an event loop: a served env through `AsyncEnvClient`, a local one in a thread."""

    async def start(self, row: Mapping[str, Any]) -> str:
        begin = EpisodeStart.from_row(row)
        return await self.begin(begin.seed, begin.reset_options())


def tool_result(observation: str) -> str:
    """The body of the last `<tool_response>` in an observation, or the observation itself."""
    found = TOOL_RESPONSE.findall(observation)
    return found[-1] if found else observation
