"""World templates: each world loaded once into an in-memory SQLite database, cached, and copied
into every episode's database.

A world is generated once into plain rows (`generation.py`), loaded into an in-memory SQLite
*template* with raw `executemany`, and kept in an LRU cache as its image; every episode's in-memory
database is then a copy-on-write mapping of that image, no SQL replayed, the world's pages held once
for all its episodes (`pages.py`), or where that cannot be done a page copy (`deserialize`; SQLite's
backup API before Python 3.11).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections import OrderedDict
from typing import Any

from sqlalchemy import Connection, create_engine, select
from sqlalchemy.dialects import sqlite
from sqlalchemy.orm import Session
from sqlalchemy.pool import StaticPool
from sqlalchemy.schema import CreateIndex, CreateTable

from agentrl.flights import models as m
from agentrl.flights.changes import CHANGE_TABLE, CHANGE_TRIGGERS
from agentrl.flights.generation import generate_world
from agentrl.flights.pages import EpisodeConnection, WorldPages
from agentrl.flights.world import SEAT_ARRAYS, World

# Presold seats reach the template by one INSERT ... SELECT that expands each (flight, cabin)'s sold
# mask against the seat maps: binding the ~8,000 rows of a 1-day world one by one from Python
# (`executemany`) was the largest part of a cold world; this loads the template in about 2/3 the time.
_SEAT_INDEX = [
    (aircraft, cabin, i, *row[:3])
    for (aircraft, cabin), (_kinds, rows) in SEAT_ARRAYS.items()
    for i, row in enumerate(rows)
]
_PRESOLD_SQL = (
    "CREATE TEMP TABLE seat_index (aircraft, cabin, i, seat_no, seat_cabin, position, "
    "PRIMARY KEY (aircraft, cabin, i)) WITHOUT ROWID;"
    "CREATE TEMP TABLE presold (flight_id, aircraft, cabin, mask);",
    "INSERT INTO temp.seat_index VALUES (?, ?, ?, ?, ?, ?)",
    "INSERT INTO temp.presold VALUES (?, ?, ?, ?)",
    "INSERT INTO occupied_seats (flight_id, seat_no, cabin, position, source, pnr) "
    "SELECT p.flight_id, s.seat_no, s.seat_cabin, s.position, 'presold', NULL FROM temp.presold p "
    "JOIN temp.seat_index s ON s.aircraft = p.aircraft AND s.cabin = p.cabin "
    "WHERE substr(p.mask, s.i + 1, 1) = '1'",
    "DROP TABLE temp.presold; DROP TABLE temp.seat_index;",
)


def new_engine() -> Any:
    """An engine bound to one private in-memory SQLite connection (the episode's database), which
    can map a world's pages (`pages.EpisodeConnection`)."""
    return create_engine(
        "sqlite://",
        poolclass=StaticPool,
        connect_args={"check_same_thread": False, "factory": EpisodeConnection},
    )


_DIALECT = sqlite.dialect()
_TABLES = m.Base.metadata.sorted_tables
_SCHEMA = ";\n".join(
    [str(CreateTable(t).compile(dialect=_DIALECT)).strip() for t in _TABLES]
    + [str(CreateIndex(i).compile(dialect=_DIALECT)) for t in _TABLES for i in t.indexes]
)
_INSERTS = {
    t.name: f"INSERT INTO {t.name} ({', '.join(c.name for c in t.columns)}) "
    f"VALUES ({', '.join('?' * len(t.columns))})"
    for t in _TABLES
}


def build_template(world: World) -> sqlite3.Connection:
    """The world as an in-memory database: the ORM's schema, rows by `executemany`, no ORM."""
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    conn.executescript(_SCHEMA)
    conn.executescript(CHANGE_TABLE)  # with the schema, before any row (see `changes.py`)
    create_temp, seat_index, presold, insert_presold, drop_temp = _PRESOLD_SQL
    conn.executescript(create_temp)
    with conn:
        for table in _TABLES:
            if table.name == "occupied_seats":
                conn.executemany(seat_index, _SEAT_INDEX)
                conn.executemany(presold, world.presold)
                conn.execute(insert_presold)
                conn.executemany(_INSERTS[table.name], world.occupied_rows)
            else:
                conn.executemany(_INSERTS[table.name], world.table_rows(table.name))
    conn.executescript(drop_temp)
    conn.executescript(CHANGE_TRIGGERS)  # after the rows: episodes start with an empty change log
    return conn


def build_row_by_row(world: World, engine: Any) -> None:
    """The naive way to set up an episode: schema and every row through the ORM (bench baseline)."""
    m.Base.metadata.drop_all(engine)
    m.Base.metadata.create_all(engine)
    models = {mapper.class_.__tablename__: mapper.class_ for mapper in m.Base.registry.mappers}
    with Session(engine) as session:
        for table in _TABLES:
            columns = [c.name for c in table.columns]
            for row in world.table_rows(table.name):
                session.add(models[table.name](**dict(zip(columns, row, strict=True))))
            session.flush()
        session.commit()


class WorldCache:
    """LRU of generated worlds with their template databases, shared by every env in a process."""

    def __init__(self, maxsize: int = 128) -> None:
        self.maxsize = maxsize
        self._worlds: OrderedDict[tuple[str, int, int, int], World] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, split: str, index: int, days: int, variant: int = 0) -> World:
        key = (split, index, days, variant)
        with self._lock:
            world = self._worlds.get(key)
            if world is not None:
                self._worlds.move_to_end(key)
                return world
        world = generate_world(split, index, days, variant)
        template = build_template(world)
        world.presold, world.occupied_rows = [], []  # in the template now
        world.occupied = {}  # generation's own
        if hasattr(template, "serialize"):
            world.pages = WorldPages(template.serialize())
            template.close()
        else:
            world.template = template
        with self._lock:
            self._worlds[key] = world
            while len(self._worlds) > self.maxsize:
                self._worlds.popitem(last=False)
        return world

    def copy_into(self, world: World, target: sqlite3.Connection) -> None:
        """Overwrite `target` with the world's template, all pages at once: a mapping of them for an
        `EpisodeConnection` that can, else a copy."""
        if world.pages is not None:
            world.pages.load_into(target)  # a copy is ~7x faster than backup() on a 30-day world
            return
        assert world.template is not None
        with self._lock:
            world.template.backup(target)


WORLDS = WorldCache()


def fingerprint(conn: Connection) -> str:
    """A hash of every row of every table, ordered by primary key: equal iff the databases are."""
    digest = hashlib.sha256()
    for table in _TABLES:
        digest.update(table.name.encode())
        for row in conn.execute(select(table).order_by(*table.primary_key.columns)):
            digest.update(repr(tuple(row)).encode())
    return digest.hexdigest()
