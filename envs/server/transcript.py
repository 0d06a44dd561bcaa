"""What each episode showed and was sent, kept so that people can watch it while it runs and after.

A step's result is already encoded where the step ran (see `episodes.py`); the transcript keeps those
bytes with the action, so recording a step costs one list append on the hot path and the snapshot
cannot change under the watcher when an env mutates its own objects later. A transcript has a byte
budget: past it the oldest steps go (their count is kept), never the first observation. Closed
episodes stay readable for a while in `RecentlyClosed`, without their env.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from agentrl.protocol import dumps

MAX_TRANSCRIPT_BYTES = 4 * 1024 * 1024
KEEP_CLOSED = 64


@dataclass(eq=False)
class WatchTranscript:
    """The first observation and every (action, encoded `StepResult`) of one episode since its reset."""

    first: bytes = b"null"  # the encoded {"observation", "info"} of the last reset
    steps: deque[tuple[str, bytes]] = field(default_factory=deque)  # the oldest go first, in O(1)
    dropped: int = 0  # oldest steps let go to stay within the byte budget
    size: int = 0
    last_reward: float | None = None
    return_: float = 0.0
    started: float = field(default_factory=time.time)  # wall clock, for people

    def begin(self, first: dict[str, Any]) -> None:
        """Start over at a reset: `first` holds the observation and info it returned."""
        self.first = dumps({"observation": first["observation"], "info": first["info"]})
        self.steps, self.dropped, self.size = deque(), 0, len(self.first)
        self.last_reward, self.return_, self.started = None, 0.0, time.time()

    def record(self, action: str, reward: float, body: bytes) -> None:
        self.steps.append((action, body))
        self.size += len(action) + len(body)
        self.last_reward = reward
        self.return_ += reward
        while self.size > MAX_TRANSCRIPT_BYTES and len(self.steps) > 1:
            old_action, old_body = self.steps.popleft()
            self.size -= len(old_action) + len(old_body)
            self.dropped += 1

    @property
    def count(self) -> int:
        """Steps taken since the reset, kept or dropped."""
        return self.dropped + len(self.steps)

    def since(self, start: int) -> list[tuple[int, str, bytes]]:
        """(step number, action, encoded result) of the kept steps numbered `start` (0-based) and later."""
        first_kept = self.dropped
        return [(first_kept + i, a, b) for i, (a, b) in enumerate(self.steps) if first_kept + i >= start]


@dataclass(eq=False)
class ClosedEpisode:
    """What stays of an episode after its close: its status and transcript, not its env."""

    episode_id: str
    env_id: str
    seed: int | None
    turns: int
    over: bool
    age_s: float
    reason: str
    transcript: WatchTranscript
    owner: str | None = None  # the client key it was made with (`agentrl.server.owners`)


class RecentlyClosed:
    """The last `limit` closed episodes, newest last, so a finished rollout can still be read."""

    def __init__(self, limit: int = KEEP_CLOSED) -> None:
        self.limit = limit
        self.episodes: OrderedDict[str, ClosedEpisode] = OrderedDict()

    def add(self, episode: ClosedEpisode) -> None:
        self.episodes[episode.episode_id] = episode
        while len(self.episodes) > self.limit:
            self.episodes.popitem(last=False)

    def get(self, episode_id: str) -> ClosedEpisode | None:
        return self.episodes.get(episode_id)
