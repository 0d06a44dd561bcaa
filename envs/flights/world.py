"""A flight world: its rows by table, the indexes that tasks and tools read, and the seat maps.

A world is generated from its key alone (`generation.py`), loaded once into an in-memory SQLite
template that every episode's database maps or copies (`templates.py`); what the three share is
here: the `World` and its lookups, the aircraft seat maps, the clock's formats and booking codes.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from functools import cached_property
from typing import Any

import numpy as np

from agentrl.flights import models as m
from agentrl.flights.geography import AIRCRAFT, AIRPORT_CITY, CITY_AIRPORTS
from agentrl.flights.pages import WorldPages

CABINS = ("economy", "business")
POSITIONS = ("window", "aisle", "middle")
PNR_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


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
SEAT_ARRAYS = {
    key: (
        np.array([POSITIONS.index(s[4]) for s in seats]),
        [(s[0], s[3], s[4], "presold", None) for s in seats],
    )
    for key, seats in CABIN_SEATS.items()
}


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
        answer rarely (see `draws.py`), where a route of four flights would give it away as
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
            seat_rows = SEAT_ARRAYS[(aircraft, cabin)][1]
            rows += [(flight_id, *seat_rows[i]) for i, sold in enumerate(mask) if sold == "1"]
        return rows

    def table_rows(self, table: str) -> list[tuple[Any, ...]]:
        """A table's rows as tuples in column order (what `executemany` takes)."""
        if table == "occupied_seats":
            return self.presold_rows() + self.occupied_rows
        columns = [c.name for c in m.Base.metadata.tables[table].columns]
        return [tuple(row[c] for c in columns) for row in self.rows[table]]
