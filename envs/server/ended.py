"""What a server remembers of the episodes it ended, so that a call on one is told it ended, not that
it is unknown, which a cluster client takes for a lost server and answers by replaying the episode.

An episode closed by a client or expired (idle past the TTL, or too old) is remembered with why it
ended and a digest of its client key (`agentrl.server.owners.key_digest`: only a caller who reaches
it hears that it ended). It is remembered until it is past the server's max age (`forget_at`, wall
clock): from then on a cluster client's own clocks say it may have ended, and the client does not
replay it whatever the server says (`agentrl.client.cluster`). At most `limit` are remembered
(`ServerConfig.ended_memory`): past it the oldest expired one is forgotten first, and the oldest
closed one only where none expired is left. An expired episode is one a cluster client's clocks
already tell as ended (it idled past the TTL, or grew past the max age); one closed by another caller
than the client (the operator, another process sharing the client's key) is told by this memory
alone, so it is kept longer.

With a state directory (`agentrl serve --state-dir`) the memory is an SQLite file there, one per
holder name, so that a holder restarted under its name (a crash, a supervised restart, a pod moved)
still knows what it ended. The changes of one turn of the event loop are written together, at its
end, as one transaction, whole or not at all (a burst of closes, a frame of them, a reap, costs one
commit), in WAL mode without a sync per commit: it survives the process being killed, which is the
restart it is for.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections import OrderedDict
from pathlib import Path
from typing import NamedTuple

from agentrl.protocol import ErrorCode
from agentrl.server.call_answers import ENDED

log = logging.getLogger("agentrl.server")
KEEP_PAST_AGE_S = 60.0  # kept this long past the max age: the wall clocks of a restart may differ a little


class Ended(NamedTuple):
    """One ended episode: why it ended (`EpisodeRegistry.close`'s reason), the digest of its client
    key (None: made without one) and when it may be forgotten (wall clock, seconds)."""

    reason: str
    owner: str | None
    forget_at: float


def memory_path(state_dir: str, holder: str) -> Path:
    """The file holding holder `holder`'s memory of ended episodes in `state_dir`."""
    return Path(state_dir) / f"{holder}.ended.sqlite3"


class EndedEpisodes:
    """The ended episodes a server remembers (see the module docstring), newest last; in memory,
    and in the SQLite file at `path` where one is given."""

    def __init__(self, limit: int, path: Path | None = None) -> None:
        self.limit = limit
        self._closed: OrderedDict[str, Ended] = OrderedDict()  # each newest last
        self._expired: OrderedDict[str, Ended] = OrderedDict()
        self._db: sqlite3.Connection | None = None
        self.path = path
        # changes not written yet, in their order: (id, what it ended as), or (id, None) to forget it
        self._unwritten: list[tuple[str, Ended | None]] = []
        if path is not None:
            self._db = self._open(path)

    def _open(self, path: Path) -> sqlite3.Connection:
        """The file at `path`, made if new; what it remembers that is still to be kept is loaded."""
        path.parent.mkdir(parents=True, exist_ok=True)
        # opened where the server is built, used on its event loop's thread: one thread at a time
        db = sqlite3.connect(path, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        with db:
            db.execute("CREATE TABLE IF NOT EXISTS ended (episode_id TEXT PRIMARY KEY, reason TEXT NOT NULL, "
                       "owner TEXT, forget_at REAL NOT NULL)")
            db.execute("DELETE FROM ended WHERE forget_at <= ?", (time.time(),))
        dropped = []
        for episode_id, reason, owner, forget_at in db.execute(
                "SELECT episode_id, reason, owner, forget_at FROM ended ORDER BY rowid"):
            dropped += self._remember(episode_id, Ended(reason, owner, forget_at))
        if dropped:  # a smaller memory than the last run's
            with db:
                db.executemany("DELETE FROM ended WHERE episode_id = ?", [(e,) for e in dropped])
        log.info("remembering %d ended episodes from %s", len(self), path)
        return db

    def __len__(self) -> int:
        return len(self._closed) + len(self._expired)

    def get(self, episode_id: str) -> Ended | None:
        return self._closed.get(episode_id) or self._expired.get(episode_id)

    def _remember(self, episode_id: str, ended: Ended) -> list[str]:
        """Keep `episode_id` as `ended` in memory; returns the ids forgotten to stay within `limit`."""
        table = self._expired if ENDED[ended.reason] == ErrorCode.EPISODE_EXPIRED else self._closed
        table[episode_id] = ended
        table.move_to_end(episode_id)
        dropped = []
        while len(self) > self.limit:
            dropped.append((self._expired or self._closed).popitem(last=False)[0])
        return dropped

    def add(self, episode_id: str, ended: Ended) -> None:
        """Remember `episode_id` as `ended`, forgetting what is past `limit` (see the module docstring)."""
        dropped = self._remember(episode_id, ended)
        self._write([(episode_id, ended), *((d, None) for d in dropped)])

    def forget_old(self, now: float) -> int:
        """Forget the oldest ones whose `forget_at` is past (up to the first still kept: the order
        is that of their ends, close to that of their `forget_at`); returns how many."""
        dropped = []
        for table in (self._closed, self._expired):
            while table and next(iter(table.values())).forget_at <= now:
                dropped.append(table.popitem(last=False)[0])
        self._write([(d, None) for d in dropped])
        return len(dropped)

    def _write(self, changes: list[tuple[str, Ended | None]]) -> None:
        """Write `changes` to the file at the end of this turn of the event loop, with every other
        change of the turn (at once, outside one)."""
        if self._db is None or not changes:
            return
        first = not self._unwritten
        self._unwritten += changes
        if first:
            try:
                asyncio.get_running_loop().call_soon(self.flush)
            except RuntimeError:  # no loop running: nothing to wait for
                self.flush()

    def flush(self) -> None:
        """Write every change not written yet, as one transaction."""
        changes, self._unwritten = self._unwritten, []
        if self._db is None or not changes:
            return
        try:
            with self._db:  # one transaction: committed whole, or rolled back
                for episode_id, ended in changes:
                    if ended is None:
                        self._db.execute("DELETE FROM ended WHERE episode_id = ?", (episode_id,))
                    else:
                        self._db.execute("INSERT OR REPLACE INTO ended VALUES (?, ?, ?, ?)",
                                         (episode_id, *ended))
        except sqlite3.Error:  # a full or broken disk: the calls that ended them were answered already
            log.exception("could not write %d changes of the ended episodes to %s; this process still "
                          "remembers them, a restart of it will not", len(changes), self.path)

    def close(self) -> None:
        """Write what is left, and close the file."""
        if self._db is not None:
            self.flush()
            self._db.close()
            self._db = None
