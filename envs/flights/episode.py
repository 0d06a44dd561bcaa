"""What Flights-v0 adds to the env core's forks and trajectory records, as a mixin of `FlightsEnv`.

A fork copies the episode's database page by page (`serialize` / `deserialize`, well under a
millisecond for a 1-day world) into an engine of its own, and deep-copies the Python state, random
generators included; the world and the task, read-only, are shared. Each step's `state_change`
is the rows it inserted, updated or deleted (see `changes.py`).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from sqlalchemy.orm import Session

from agentrl.flights.changes import NO_CHANGE, ChangeLog, RowChanges
from agentrl.flights.pages import EpisodeConnection
from agentrl.flights.templates import new_engine


class EpisodeDatabase:
    """Row changes per step and copy-forks for `FlightsEnv` (listed before `ToolEnv` in its bases)."""

    fork_by_copy: ClassVar[bool] = True
    fork_shared: ClassVar[frozenset[str]] = frozenset({"world", "task", "_engine", "_raw", "session"})
    _raw: EpisodeConnection
    _changes: ChangeLog

    def _begin(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        begun = super()._begin(options)  # type: ignore[misc]  # a mixin: ToolEnv, after it in the MRO, has it
        self._changes = ChangeLog(self._raw)  # the reset copied in the template: an empty change table
        return begun

    def _world_state(self) -> dict[str, Any]:
        """The rows the episode changed, the last search (what `filter_flights` and pages read), the
        fine level's holds and quotes, and the moving world's flags; never the random generator."""
        return {
            "rows": self._changes.net_rows(self._raw),
            "last_search": getattr(self, "_last_search", None),
            "holds": sorted(json.dumps(h, sort_keys=True) for h in getattr(self, "_holds", {}).values()),
            "quotes": sorted(json.dumps(q, sort_keys=True) for q in getattr(self, "_quotes", {}).values()),
            "flags": [getattr(self, "_was_busy", False), getattr(self, "_fare_changed", False)],
        }

    def _state_change(self) -> RowChanges:
        changes = self._changes.take(self._raw)
        if changes is not NO_CHANGE:  # a step that wrote: its writes fill a few pages of the room at most
            self._raw.keep_room()
        return changes

    def _open_database(self) -> None:
        """The episode's own in-memory database: its engine, raw connection and ORM session."""
        self._engine = new_engine()
        self._raw = self._engine.raw_connection().driver_connection
        self.session = Session(self._engine, expire_on_commit=False)

    def _fork_resources(self, child: Any) -> None:
        """The fork's own engine, session and database: a page copy of this episode's."""
        child._open_database()
        child._raw.deserialize(self._raw.serialize())
        child._changes.rebind(child._raw)
