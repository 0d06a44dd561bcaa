"""What a cluster client keeps of each live episode to replay it, and how it replays its steps.

`agentrl.client.cluster` records, per episode, a `Recipe`: how the episode was made and each reset
and step since, with an `answer_digest` of each answer; when the episode's holder is lost, it creates the
episode again elsewhere and replays the recipe's ops in the `replay_batches` given here, checking
every answer against its digest. Kept apart from the routing: this is the record, that the I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from agentrl.core import StepResult
from agentrl.protocol import MAX_BATCH, EpisodeCreated

REPLAY_BATCH_CHARS = 1 << 20  # action characters per batch of replayed steps (a server takes 16 MiB)
REPLAY_BATCH_S = 1.0  # the recorded seconds of the steps in one batch of replayed steps


def _hash(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def answer_digest(got: StepResult | EpisodeCreated) -> tuple[Any, ...]:
    """What a replayed answer must equal, field by field (`DIGEST_FIELDS`): the observation and the
    info hashed (memory stays flat however long the episode), the reward and the end flags (a
    create's or reset's answer has none: 0 and False). An env's info is a function of its seed and
    actions as its observations are (the task id, the state hash, the calls' outcomes...), so a
    replay that answers another info is another episode."""
    if isinstance(got, EpisodeCreated):
        reward, terminated, truncated = 0.0, False, False
    else:
        reward, terminated, truncated = got.reward, got.terminated, got.truncated
    return (_hash(got.observation), _hash(json.dumps(got.info, sort_keys=True, default=str)), float(reward),
            bool(terminated), bool(truncated))


DIGEST_FIELDS = ("observation", "info", "reward", "terminated", "truncated")


@dataclass
class Recipe:
    """What re-creates one live episode: how it was made, and each reset and step since, with a
    digest of what each answered (`ops`: ("reset", seed, options, digest) or ("step", action,
    seconds, digest), where seconds is how long the step's call took, which bounds its replay's
    batches).

    Its clocks say whether the server may have ended it: `made_at` and `used_at` are when the
    create, and the last call that the server counts as a use (a step, a reset, a fork), were sent
    (`time.monotonic()`), each no later than the server's own clock started, so this client's idle
    time and age are never shorter than the server's; `idle_ttl_s` and `max_age_s` are the TTLs its
    holder answered (None: a server that states none)."""

    env_id: str
    seed: int
    options: dict[str, Any] | None
    env_kwargs: dict[str, Any] | None
    first: tuple[Any, ...]
    holder: str
    server_id: str
    ops: list[tuple[Any, ...]] = field(default_factory=list)
    made_at: float = 0.0
    used_at: float = 0.0
    idle_ttl_s: float | None = None
    max_age_s: float | None = None

    def steps(self) -> int:
        return sum(op[0] == "step" for op in self.ops)

    def start_clocks(self, sent: float, made: EpisodeCreated) -> None:
        """Its clocks from a create (or fork, or replay) sent at `sent` that answered `made`."""
        self.made_at = self.used_at = sent
        self.idle_ttl_s, self.max_age_s = made.idle_ttl_s, made.max_age_s

    def may_have_ended(self, now: float) -> str | None:
        """Why its server may have ended it by `now` (idle past its TTL, or older than its max age),
        or None where it cannot have: its server closed it whatever the server still remembers."""
        idle, age = now - self.used_at, now - self.made_at
        if self.idle_ttl_s is not None and idle > self.idle_ttl_s:
            return f"idle {idle:.1f} s, past its server's idle TTL of {self.idle_ttl_s:g} s"
        if self.max_age_s is not None and age > self.max_age_s:
            return f"{age:.1f} s old, past its server's max age of {self.max_age_s:g} s"
        return None


@dataclass
class ReplayStats:
    """What replays cost this client: episodes replayed, steps replayed, time spent replaying, and
    the part of that time spent creating the new episodes (a world's build, a sandbox's start),
    apart because it does not grow with the steps."""

    episodes: int = 0
    steps: int = 0
    seconds: float = 0.0
    create_seconds: float = 0.0  # within `seconds`
    lost: int = 0  # episodes that could not be replayed (`EpisodeLostError`)
    ended: int = 0  # lost episodes not replayed: by this client's clocks their server may have ended them
    map_misses: int = 0  # reads of the map that failed while the map already known was kept


def op_name(op: tuple[Any, ...], steps: int) -> str:
    """A recipe's op as an error names it, `steps` being the steps up to it, its own included."""
    return f"step {steps} ({op[1][:60]!r})" if op[0] == "step" else f"the reset after step {steps}"


def replay_batches(ops: list[tuple[Any, ...]]) -> Generator[list[tuple[Any, ...]], None, None]:
    """A recipe's ops as they are replayed: each reset alone, the steps between in batches of at most
    `MAX_BATCH` steps, `REPLAY_BATCH_CHARS` of actions (a request far under a server's body limit
    however long the episode) and `REPLAY_BATCH_S` of the steps' recorded time (so a batch of slow
    steps, a sandbox's commands, answers well within the client's timeout, as each step did)."""
    batch: list[tuple[Any, ...]] = []
    chars, seconds = 0, 0.0
    for op in ops:
        if batch and (op[0] == "reset" or len(batch) == MAX_BATCH or chars + len(op[1]) > REPLAY_BATCH_CHARS
                      or seconds + op[2] > REPLAY_BATCH_S):
            yield batch
            batch, chars, seconds = [], 0, 0.0
        if op[0] == "reset":
            yield [op]
        else:
            batch.append(op)
            chars, seconds = chars + len(op[1]), seconds + op[2]
    if batch:
        yield batch
