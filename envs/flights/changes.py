"""The rows each step of a Flights-v0 episode inserts, updates and deletes.

Triggers on every table of the world append each change, as JSON, to the `agentrl_changes` table;
the env reads the new entries once per step (`ChangeLog.take`) and decodes them only when a
trajectory record is built (`RowChanges.decode`). They catch every write, whichever way a tool makes
it (ORM objects or Core statements). The triggers and the (empty) table are part of
the world's template database, so the page copy of each reset and of each fork brings them along and
no episode pays for creating them; the verifier and `fingerprint` read the world's own tables only,
so the log never enters a judgement.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from agentrl.flights import models as m

TABLE = "agentrl_changes"


def _json_row(prefix: str, columns: list[str]) -> str:
    return "json_object(" + ", ".join(f"'{c}', {prefix}.{c}" for c in columns) + ")"


def _triggers() -> str:
    """Three triggers (insert, update, delete) per table of the world."""
    sql = []
    for table in m.Base.metadata.sorted_tables:
        columns = [c.name for c in table.columns]
        old, new = _json_row("OLD", columns), _json_row("NEW", columns)
        for op, before, after in (("insert", "NULL", new), ("update", old, new), ("delete", old, "NULL")):
            sql.append(
                f"CREATE TRIGGER {TABLE}_{table.name}_{op} AFTER {op.upper()} ON {table.name} "
                f"BEGIN INSERT INTO {TABLE} (tbl, op, old, new) "
                f"VALUES ('{table.name}', '{op}', {before}, {after}); END;"
            )
    return "\n".join(sql)


# The table is created with the world's schema, before any row: every template then has it at the
# same root page, as it has every other table, which a connection that deserializes one world's
# image after another's relies on (the schema cookie is the same, so its cached schema is kept).
CHANGE_TABLE = f"CREATE TABLE {TABLE} (id INTEGER PRIMARY KEY, tbl TEXT, op TEXT, old TEXT, new TEXT);"
# The triggers come once the rows are in, or loading the world would log every row.
CHANGE_TRIGGERS = _triggers()
_SINCE = f"SELECT id, tbl, op, old, new FROM {TABLE} WHERE id > ? ORDER BY id"
_KEYS = {t.name: tuple(c.name for c in t.primary_key.columns) for t in m.Base.metadata.sorted_tables}
# ids an episode draws at random or by counting (booking references, ledger rows): two episodes
# that made the same bookings in another order hold the same rows under other ids
_DRAWN_IDS = frozenset({"pnr", "id"})
_ID_TABLES = frozenset({"bookings", "payments", "occupied_seats"})


def _net_row(table: str, now: str) -> str:
    """One changed row as `changed_rows` lists it: the table, then the row without its drawn ids."""
    row = json.loads(now)
    if table in _ID_TABLES:
        row = {c: v for c, v in row.items() if c not in _DRAWN_IDS}
    return f"{table} {json.dumps(row, sort_keys=True)}"


def changed_rows(conn: sqlite3.Connection) -> list[str]:
    """The rows an episode has changed so far, as they are now, without the ids it drew: what its
    database holds beyond the world's template (a row changed and changed back is not counted).

    Read from the whole change table: the reference that `ChangeLog.net_rows`, which keeps the same
    list up to date as the changes come in, is tested against."""
    net = NetChanges()
    net.add(tuple(conn.execute(f"SELECT tbl, op, old, new FROM {TABLE} ORDER BY id")))
    return net.rows()


class NetChanges:
    """The net effect of change-log entries fed in order: each changed row's first and last state,
    and what a search shows of them: the seats sold per (flight, cabin) beyond the template's and
    the fares that moved.

    `rows()` is `changed_rows`'s list, rebuilt only after new entries came in: a step that wrote
    nothing (most steps: searches, look-ups) reads the list it had, and one that wrote reads no SQL
    for the earlier ones (it rewrites each changed row's line, a few per episode). `sold` and
    `prices` let a search answer from the world's template figures plus these, with no SQL
    (`WorldQueries._summaries`)."""

    def __init__(self) -> None:
        self.first: dict[tuple[str, str], str | None] = {}
        self.last: dict[tuple[str, str], str | None] = {}
        self._rows: list[str] | None = []
        self.sold: dict[tuple[int, str], int] = {}  # seats sold beyond the template's
        self.prices: dict[tuple[int, str], int] = {}  # fares that differ from the template's

    def add(self, entries: tuple[tuple[str, str, str | None, str | None], ...]) -> None:
        for table, _op, old, new in entries:
            row = json.loads(new if new is not None else old)  # type: ignore[arg-type]  # one is set
            key = (table, json.dumps([row[c] for c in _KEYS[table]]))
            self.first.setdefault(key, old)
            self.last[key] = new
            if table == "occupied_seats":
                if old is not None:
                    was = row if new is None else json.loads(old)
                    self._count_sold(was, -1)
                if new is not None:
                    self._count_sold(row, 1)
            elif table == "fares" and new is not None:
                self.prices[(row["flight_id"], row["cabin"])] = row["price"]
        if entries:
            self._rows = None

    def _count_sold(self, seat: dict[str, Any], n: int) -> None:
        key = (seat["flight_id"], seat["cabin"])
        self.sold[key] = self.sold.get(key, 0) + n

    def rows(self) -> list[str]:
        if self._rows is None:
            rows = []
            for key, now in self.last.items():
                was = self.first[key]
                if now is None:
                    if was is not None:
                        rows.append(f"deleted {key[0]} {key[1]}")
                elif now != was:
                    rows.append(_net_row(key[0], now))
            self._rows = sorted(rows)
        return self._rows


@dataclass(frozen=True)
class RowChanges:
    """The change-log entries of one step, as read: (table, op, old JSON, new JSON) each."""

    entries: tuple[tuple[str, str, str | None, str | None], ...] = ()

    def decode(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """{"inserted": {table: [row]}, "updated": {table: [{"before": row, "after": row}]},
        "deleted": {table: [row]}}, rows as SQLite stores them (booleans as 0 / 1); an update that
        changed nothing is left out."""
        change: dict[str, dict[str, list[dict[str, Any]]]] = {"inserted": {}, "updated": {}, "deleted": {}}
        for table, op, old, new in self.entries:
            if op == "insert":
                assert new is not None, "an insert's entry holds the new row"
                change["inserted"].setdefault(table, []).append(json.loads(new))
            elif op == "delete":
                assert old is not None, "a delete's entry holds the old row"
                change["deleted"].setdefault(table, []).append(json.loads(old))
            elif old != new:
                assert old is not None and new is not None, "an update's entry holds both rows"
                pair = {"before": json.loads(old), "after": json.loads(new)}
                change["updated"].setdefault(table, []).append(pair)
        return change


NO_CHANGE = RowChanges()


class ChangeLog:
    """Where an episode is in its database's change table: the id of the last change read, the
    connection's count of changed rows then (a step that wrote nothing skips the query), the entries
    read but not yet handed to a step's record, and their net effect so far (`NetChanges`).

    Plain data, so a fork's deep copy continues from where its parent was (`rebind` then sets the
    count of the fork's own connection)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.mark = 0
        self.pending: list[tuple[str, str, str | None, str | None]] = []
        self.net = NetChanges()
        self.rebind(conn)

    def rebind(self, conn: sqlite3.Connection) -> None:
        self.total = conn.total_changes

    def _read(self, conn: sqlite3.Connection) -> None:
        """Read the entries written since the last read, once, for both the record and the net rows."""
        if conn.total_changes == self.total:
            return
        self.total = conn.total_changes
        rows = conn.execute(_SINCE, (self.mark,)).fetchall()
        if rows:
            self.mark = rows[-1][0]
            entries = tuple(row[1:] for row in rows)
            self.pending.extend(entries)
            self.net.add(entries)

    def take(self, conn: sqlite3.Connection) -> RowChanges:
        """The changes since the last call."""
        self._read(conn)
        if not self.pending:
            return NO_CHANGE
        entries, self.pending = tuple(self.pending), []
        return RowChanges(entries)

    def net_rows(self, conn: sqlite3.Connection) -> list[str]:
        """`changed_rows(conn)`, kept up to date from the entries as they are read."""
        self._read(conn)
        return self.net.rows()

    def now(self, conn: sqlite3.Connection) -> NetChanges:
        """The net changes including every write so far (a tool that reads after a write of the same
        step sees it)."""
        self._read(conn)
        return self.net
