"""Generating a flight world per task seed, and copying it fast into each episode's database.

A world is a pure function of (split, index, days): its own start date, city pair (one of the
split's), schedule, fares, seat maps and customers. The pair is flown mostly on its trunk, the
route between the two cities' main airports, about 35 times a day each way, and more thinly to
and from a second airport at lower fares. Requests are about trunks, and the trips customers have
already booked are on them: a request's exact route then has enough flights that no place of an
order blind to its constraints (the route's 2nd cheapest, 3rd earliest, ...) holds the answer
often (see `tasks.py`), where a route of four flights a day gave it away at the 2nd place. One
pair a world keeps the rows (and so the cost of each episode's copy) about what four thinly flown
pairs had. It is generated once into plain
rows, loaded into an in-memory SQLite *template* with raw `executemany`, and kept in an LRU
cache as its image; every episode's in-memory database is then a copy-on-write mapping of that
image, no SQL replayed, the world's pages held once for all its episodes (`pages.py`), or where
that cannot be done a page copy (`deserialize`; SQLite's backup API before Python 3.11).

Past 500 lines on purpose: generation and the template load share one row layout, kept in one
place so that a change to a table changes both.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from functools import cached_property
from typing import Any

import numpy as np
from sqlalchemy import Connection, create_engine, select
from sqlalchemy.dialects import sqlite
from sqlalchemy.orm import Session
from sqlalchemy.pool import StaticPool
from sqlalchemy.schema import CreateIndex, CreateTable

from agentrl.flights import models as m
from agentrl.flights.changes import CHANGE_TABLE, CHANGE_TRIGGERS
from agentrl.flights.geography import (
    AIRCRAFT,
    AIRPORT_CITY,
    AIRPORTS,
    CARRIERS,
    CITY_AIRPORTS,
    CITY_PAIRS,
    FIRST_NAMES,
    LAST_NAMES,
    PASSENGER_IDS,
    SPLIT_NAMES,
)
from agentrl.flights.pages import EpisodeConnection, WorldPages

START_DATE = date(2026, 3, 2)
CABINS = ("economy", "business")
POSITIONS = ("window", "aisle", "middle")
PNR_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
PAIRS_PER_WORLD = 1
TRUNK_LEGS = (34, 40)  # legs a day each way between the pair's main airports: fewest, most
SIDE_DISCOUNT = 0.8  # fares off the trunk are lower on average, as at a second airport
N_PASSENGERS = 40


def seat_map(aircraft: str) -> list[tuple[str, int, str, str, str]]:
    """(seat_no, row, letter, cabin, position) for every seat of an aircraft type."""
    seats = []
    for cabin, first, last, groups in AIRCRAFT[aircraft]:
        edges = {groups[0][0], groups[-1][-1]}
        aisles = {g[0] for g in groups[1:]} | {g[-1] for g in groups[:-1]}
        for row in range(first, last + 1):
            for group in groups:
                for letter in group:
                    position = "window" if letter in edges else "aisle" if letter in aisles else "middle"
                    seats.append((f"{row}{letter}", row, letter, cabin, position))
    return seats


SEAT_MAPS = {name: seat_map(name) for name in AIRCRAFT}
SEAT_INFO = {name: {s[0]: s for s in seats} for name, seats in SEAT_MAPS.items()}
CABIN_SEATS = {(a, c): [s for s in seats if s[3] == c] for a, seats in SEAT_MAPS.items() for c in CABINS}
CAPACITY = {key: len(seats) for key, seats in CABIN_SEATS.items()}
# per (aircraft, cabin): position codes (indexes into POSITIONS) and presold rows less the flight id
_SEAT_ARRAYS = {
    key: (
        np.array([POSITIONS.index(s[4]) for s in seats]),
        [(s[0], s[3], s[4], "presold", None) for s in seats],
    )
    for key, seats in CABIN_SEATS.items()
}
# Presold seats reach the template by one INSERT ... SELECT that expands each (flight, cabin)'s sold
# mask against the seat maps: binding the ~8,000 rows of a 1-day world one by one from Python
# (`executemany`) was the largest part of a cold world; this loads the template in about 2/3 the time.
_SEAT_INDEX = [
    (aircraft, cabin, i, *row[:3])
    for (aircraft, cabin), (_kinds, rows) in _SEAT_ARRAYS.items()
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


def hhmm(minutes: int) -> str:
    days, minutes = divmod(minutes, 24 * 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}" + (f"+{days}" if days else "")


def minutes(t: str) -> int:
    return int(t[:2]) * 60 + int(t[3:5])


def new_pnr(rng: np.random.Generator) -> str:
    return "".join(PNR_ALPHABET[i] for i in rng.integers(len(PNR_ALPHABET), size=6))


def departure(flight: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(f"{flight['date']} {flight['departs']}")


@dataclass
class World:
    """A generated world: its rows (by table) plus the indexes that tasks and tools read."""

    split: str
    index: int
    days: int
    variant: int
    start: date
    now: str  # "YYYY-MM-DD HH:MM": the desk's clock, the evening or day before the first flight day
    city_pairs: tuple[tuple[str, str], ...]
    rows: dict[str, list[dict[str, Any]]]
    # the seats sold before the episode: (flight id, aircraft, cabin, a "0"/"1" per seat of the
    # cabin's map), and the other occupied seats' rows (the bookings'); both in the template once cached
    presold: list[tuple[int, str, str, str]] = field(default_factory=list)
    occupied_rows: list[tuple[int, str, str, str, str, str | None]] = field(default_factory=list)
    flights: dict[int, dict[str, Any]] = field(default_factory=dict)
    fares: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)
    # the seats taken per flight while customers are generated (`free_seats`); dropped once the
    # world is cached: a set per flight was a fifth of a cached world's memory, and only
    # generation reads it (task generation reads `free_counts`)
    occupied: dict[int, set[str]] = field(default_factory=dict)
    by_route: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)
    # free seats per (flight, cabin) and position in the template (what task generation reads)
    free_counts: dict[tuple[int, str], dict[str, int]] = field(default_factory=dict)
    template: sqlite3.Connection | None = None
    # the template's pages, held once: immutable, so episodes map or copy them with no lock
    pages: WorldPages | None = None

    @property
    def image(self) -> bytes | None:
        """The template database's image (what `Connection.deserialize` takes), once cached."""
        return None if self.pages is None else self.pages.image()

    @property
    def key(self) -> tuple[str, int, int, int]:
        return self.split, self.index, self.days, self.variant

    @cached_property
    def bookings(self) -> dict[str, dict[str, Any]]:
        return {b["pnr"]: b for b in self.rows["bookings"]}

    @cached_property
    def passengers(self) -> dict[str, dict[str, Any]]:
        return {p["id"]: p for p in self.rows["passengers"]}

    @cached_property
    def passenger_ids(self) -> frozenset[str]:
        return frozenset(self.passengers)

    @cached_property
    def methods(self) -> dict[str, dict[str, Any]]:
        return {pm["id"]: pm for pm in self.rows["payment_methods"]}

    @cached_property
    def balances(self) -> dict[str, int]:
        return {pm["id"]: pm["balance"] for pm in self.rows["payment_methods"]}

    @cached_property
    def now_dt(self) -> datetime:
        return datetime.fromisoformat(self.now)

    @property
    def dates(self) -> list[str]:
        return [(self.start + timedelta(days=d)).isoformat() for d in range(self.days)]

    @cached_property
    def task_routes(self) -> tuple[tuple[str, str, str], ...]:
        """The trunks, each day: (main airport, main airport, day) of each city pair, both ways.

        Requests are about trunks only, as each is flown about twenty times a day: every place of
        a blind order of the route (cheapest, earliest, latest, dearest, listed) then holds the
        answer rarely (see `tasks.py`), where a route of four flights would give it away as
        "the second cheapest" or "the second earliest"."""
        return tuple(
            (CITY_AIRPORTS[x][0], CITY_AIRPORTS[y][0], day)
            for a, b in self.city_pairs
            for x, y in ((a, b), (b, a))
            for day in self.dates
        )

    def free_seats(self, flight_id: int, cabin: str, position: str | None = None) -> list[str]:
        taken = self.occupied[flight_id]
        return [
            s[0]
            for s in CABIN_SEATS[(self.flights[flight_id]["aircraft"], cabin)]
            if (position is None or s[4] == position) and s[0] not in taken
        ]

    def route_flights(self, origin: str, destination: str, day: str) -> list[int]:
        return self.by_route.get((origin, destination, day), [])

    def city_flights(self, origin: str, destination: str, day: str) -> list[int]:
        """The day's flights between any airports of the two airports' cities."""
        key = (AIRPORT_CITY[origin], AIRPORT_CITY[destination], day)
        found = self._by_city.get(key)
        if found is None:
            found = [
                f
                for o in CITY_AIRPORTS[key[0]]
                for d in CITY_AIRPORTS[key[1]]
                for f in self.route_flights(o, d, day)
            ]
            self._by_city[key] = found
        return found

    def other_flights(self, origin: str, destination: str, day: str) -> list[int]:
        """The day's flights between the two cities that are not on this exact route."""
        key = (origin, destination, day)
        found = self._others.get(key)
        if found is None:
            exact = set(self.route_flights(origin, destination, day))
            found = self._others[key] = [f for f in self.city_flights(*key) if f not in exact]
        return found

    @cached_property
    def _by_city(self) -> dict[tuple[str, str, str], list[int]]:
        return {}

    @cached_property
    def _others(self) -> dict[tuple[str, str, str], list[int]]:
        return {}

    def presold_rows(self) -> list[tuple[int, str, str, str, str, None]]:
        """The presold seats' rows, expanded from their masks (the template inserts them in SQL)."""
        rows = []
        for flight_id, aircraft, cabin, mask in self.presold:
            seat_rows = _SEAT_ARRAYS[(aircraft, cabin)][1]
            rows += [(flight_id, *seat_rows[i]) for i, sold in enumerate(mask) if sold == "1"]
        return rows

    def table_rows(self, table: str) -> list[tuple[Any, ...]]:
        """A table's rows as tuples in column order (what `executemany` takes)."""
        if table == "occupied_seats":
            return self.presold_rows() + self.occupied_rows
        columns = [c.name for c in m.Base.metadata.tables[table].columns]
        return [tuple(row[c] for c in columns) for row in self.rows[table]]


# the tables every world has alike (airports, carriers, seat maps): read-only, held once
_FIXED_ROWS: dict[str, list[dict[str, Any]]] = {
    "airports": [dict(code=c, name=n, city=city, country=k) for c, n, city, k in AIRPORTS],
    "carriers": [dict(code=c, name=n) for c, n in CARRIERS],
    "aircraft_seats": [
        dict(aircraft=a, seat_no=s, row=r, letter=ltr, cabin=c, position=p)
        for a, seats in SEAT_MAPS.items()
        for s, r, ltr, c, p in seats
    ],
}


def generate_world(split: str, index: int, days: int, variant: int = 0) -> World:
    """All rows of a world, from its key alone (numpy's PCG64, so stable across platforms).

    `variant` > 0 names a spare world of the same seed, for the rare request a world cannot host.
    """
    if split not in SPLIT_NAMES:
        raise ValueError(f"split must be one of {SPLIT_NAMES}")
    rng = np.random.default_rng([index, days, SPLIT_NAMES.index(split), variant, 7741])
    start = START_DATE + timedelta(days=int(rng.integers(0, 270)))
    now = datetime.combine(start - timedelta(days=1), datetime.min.time()) + timedelta(
        minutes=int(rng.integers(8 * 12, 16 * 12)) * 5
    )
    pool = list(CITY_PAIRS[split])
    chosen = sorted(int(i) for i in rng.choice(len(pool), size=PAIRS_PER_WORLD, replace=False))
    pairs = tuple(pool[i] for i in chosen)
    rows: dict[str, list[dict[str, Any]]] = {t: [] for t in m.Base.metadata.tables}
    rows.update(_FIXED_ROWS)  # the same in every world: one list each, shared
    world = World(split, index, days, variant, start, now.strftime("%Y-%m-%d %H:%M"), pairs, rows)
    _add_flights(world, rng, _schedule(pairs, split, rng))
    _add_customers(world, rng)
    return world


def _schedule(
    pairs: tuple[tuple[str, str], ...], split: str, rng: np.random.Generator
) -> list[dict[str, Any]]:
    """A daily timetable per direction of each city pair: a dense trunk between the two cities' main
    airports (what requests are about) and thinner legs to or from a second airport (what a
    city-level reading of a request would take)."""
    legs, used = [], set()
    for city_a, city_b in pairs:
        block, per_day, carriers = CITY_PAIRS[split][(city_a, city_b)]
        for origin_city, dest_city in ((city_a, city_b), (city_b, city_a)):
            origins, dests = CITY_AIRPORTS[origin_city], CITY_AIRPORTS[dest_city]
            trunk = int(rng.integers(TRUNK_LEGS[0], TRUNK_LEGS[1] + 1))
            side = 2 * per_day + int(rng.integers(-1, 2))
            slots = rng.choice(np.arange(6 * 12, 22 * 12), size=trunk + side, replace=False) * 5
            on_trunk = rng.permutation(trunk + side) < trunk
            for slot, main in zip(sorted(int(s) for s in slots), on_trunk.tolist(), strict=True):
                carrier = carriers[int(rng.integers(len(carriers)))]
                number = f"{carrier}{int(rng.integers(100, 9999))}"
                while number in used:
                    number = f"{carrier}{int(rng.integers(100, 9999))}"
                used.add(number)
                origin, destination = (origins[0], dests[0]) if main else _side(origins, dests, rng)
                legs.append(
                    dict(
                        number=number,
                        carrier=carrier,
                        origin=origin,
                        destination=destination,
                        departs=slot,
                        block=block + int(rng.integers(-15, 16)),
                        aircraft="A333" if block > 300 else ("A320", "B738")[int(rng.integers(2))],
                        base=int(
                            (300 + block * 4.2 * (1.0 + 0.25 * rng.random()))
                            * (1.0 if main else SIDE_DISCOUNT)
                        ),
                    )
                )
    return legs


def _side(origins: list[str], destinations: list[str], rng: np.random.Generator) -> tuple[str, str]:
    """A leg off the trunk: a second airport at one end at least (every pair has a city with two)."""
    while True:
        origin = origins[int(rng.integers(len(origins)))]
        destination = destinations[int(rng.integers(len(destinations)))]
        if (origin, destination) != (origins[0], destinations[0]):
            return origin, destination


def _add_flights(world: World, rng: np.random.Generator, legs: list[dict[str, Any]]) -> None:
    """Each leg flown on most days, with day-to-day fares, loads and sold-out seat types."""
    rows, flight_id = world.rows, 0
    for day in world.dates:
        for leg in legs:
            if rng.random() < 0.08:  # not every flight operates every day
                continue
            flight_id += 1
            flight = dict(
                id=flight_id,
                number=leg["number"],
                carrier=leg["carrier"],
                origin=leg["origin"],
                destination=leg["destination"],
                date=day,
                departs=hhmm(leg["departs"]),
                arrives=hhmm(leg["departs"] + leg["block"]),
                aircraft=leg["aircraft"],
            )
            rows["flights"].append(flight)
            world.flights[flight_id] = flight
            world.by_route.setdefault((leg["origin"], leg["destination"], day), []).append(flight_id)
            economy = int(round(leg["base"] * (0.55 + 1.2 * rng.random()), -1))
            business = int(round(economy * (2.5 + 1.5 * rng.random()), -1))
            for cabin, price in (("economy", economy), ("business", business)):
                basic = cabin == "economy" and rng.random() < 0.4
                fare = dict(
                    flight_id=flight_id,
                    cabin=cabin,
                    price=price,
                    refund_pct=int(rng.choice([0, 50, 75] if cabin == "economy" else [75, 90, 100])),
                    # never free: a string of moves leaves its fees in the ledger
                    change_fee=int(rng.choice([100, 200, 300] if cabin == "economy" else [50, 100, 200])),
                    changeable=not basic,
                )
                rows["fares"].append(fare)
                world.fares[(flight_id, cabin)] = fare
            taken: set[str] = set()
            for cabin in CABINS:
                kinds, rows_of = _SEAT_ARRAYS[(leg["aircraft"], cabin)]
                load = 1.0 if rng.random() < 0.06 else 0.15 + 0.8 * rng.random()
                sold = rng.random(len(kinds)) < load
                draw = rng.random()
                if draw < 0.25:  # every window (or aisle) seat already gone: seat requests must check
                    sold |= kinds == (0 if draw < 0.15 else 1)
                free = np.bincount(kinds[~sold], minlength=len(POSITIONS))
                world.free_counts[(flight_id, cabin)] = dict(zip(POSITIONS, free.tolist(), strict=True))
                mask = (sold.view(np.uint8) + ord("0")).tobytes().decode()
                world.presold.append((flight_id, leg["aircraft"], cabin, mask))
                taken.update([rows_of[i][0] for i in np.flatnonzero(sold).tolist()])
            world.occupied[flight_id] = taken


def _add_customers(world: World, rng: np.random.Generator) -> None:
    """Passengers, their payment methods, and the trips most of them have already booked."""
    rows, split = world.rows, world.split
    low, high = PASSENGER_IDS[split]
    ids = rng.choice(high - low, size=N_PASSENGERS, replace=False) + low
    firsts, lasts = FIRST_NAMES[split], LAST_NAMES[split]
    names: set[str] = set()
    pnrs: set[str] = set()
    method_numbers = rng.choice(900_000, size=2 * N_PASSENGERS, replace=False) + 100_000
    trunks = {route[:2] for route in world.task_routes}  # trips on the routes requests are about
    flight_ids = [f for f, fl in world.flights.items() if (fl["origin"], fl["destination"]) in trunks]
    first_day = [f for f in flight_ids if world.flights[f]["date"] == world.dates[0]]
    for i, number in enumerate(int(x) for x in ids):
        pid = f"P{number}"
        name = f"{firsts[int(rng.integers(len(firsts)))]} {lasts[int(rng.integers(len(lasts)))]}"
        while name in names:
            name = f"{firsts[int(rng.integers(len(firsts)))]} {lasts[int(rng.integers(len(lasts)))]}"
        names.add(name)
        rows["passengers"].append(
            dict(id=pid, name=name, email=f"{name.replace(' ', '.').lower()}{number % 100}@example.com")
        )
        card = dict(
            id=f"pm_card_{int(method_numbers[2 * i])}",
            passenger_id=pid,
            kind="card",
            label="credit card",
            opening_balance=int(rng.integers(60, 120)) * 1000,
        )
        wallet = dict(
            id=f"pm_wallet_{int(method_numbers[2 * i + 1])}",
            passenger_id=pid,
            kind="wallet",
            label="travel wallet",
            opening_balance=int(rng.integers(3, 15)) * 1000,
        )
        for method in (card, wallet):
            method["balance"] = method["opening_balance"]
            rows["payment_methods"].append(method)
        if rng.random() < 0.3:
            continue
        # an existing trip on a seated trunk flight, half of them on the first day (near the clock);
        # a trunk has earlier flights for nearly every one (so moving earlier can be asked) and the
        # first flights of the day for a few (where no earlier one fits)
        for _attempt in range(50):
            pool = first_day if rng.random() < 0.5 else flight_ids
            flight = world.flights[pool[int(rng.integers(len(pool)))]]
            cabin = "economy" if rng.random() < 0.75 else "business"
            free = world.free_seats(flight["id"], cabin)
            if free:
                break
        pnr = new_pnr(rng)
        while pnr in pnrs:
            pnr = new_pnr(rng)
        pnrs.add(pnr)
        seat_no = free[int(rng.integers(len(free)))]
        price = world.fares[(flight["id"], cabin)]["price"]
        rows["bookings"].append(
            dict(
                pnr=pnr,
                passenger_id=pid,
                flight_id=flight["id"],
                cabin=cabin,
                seat_no=seat_no,
                fare_paid=price,
                payment_method_id=card["id"],
                status="confirmed",
            )
        )
        position = SEAT_INFO[flight["aircraft"]][seat_no][4]
        world.occupied_rows.append((flight["id"], seat_no, cabin, position, "booking", pnr))
        world.occupied[flight["id"]].add(seat_no)
        world.free_counts[(flight["id"], cabin)][position] -= 1
        rows["payments"].append(
            dict(
                id=len(rows["payments"]) + 1, pnr=pnr, payment_method_id=card["id"], kind="fare", amount=price
            )
        )
        card["balance"] -= price


# --- databases ---------------------------------------------------------------------------------
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
