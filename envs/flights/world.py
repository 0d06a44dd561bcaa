"""Generating the flight world, and copying it fast into each episode's database.

A world is a pure function of (world seed, days). It is generated once into plain rows, loaded
once into an in-memory SQLite *template*, and kept in an LRU cache; every episode then gets its
own in-memory database as a page copy, no SQL replayed: `deserialize` of the template's serialised
image where Python has it (3.11+), SQLite's online backup API elsewhere. The rows
stay around too, so tasks are generated from Python data without querying SQL.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import cached_property
from typing import Any

import numpy as np
from sqlalchemy import Connection, create_engine, insert, select
from sqlalchemy.orm import Session
from sqlalchemy.pool import StaticPool

from agentrl.flights import models as m

START_DATE = date(2026, 3, 2)
CABINS = ("economy", "business")
POSITIONS = ("window", "aisle", "middle")

# code, name, city, country
AIRPORTS = [
    ("PEK", "Beijing Capital International", "Beijing", "CN"),
    ("PKX", "Beijing Daxing International", "Beijing", "CN"),
    ("SHA", "Shanghai Hongqiao International", "Shanghai", "CN"),
    ("PVG", "Shanghai Pudong International", "Shanghai", "CN"),
    ("CAN", "Guangzhou Baiyun International", "Guangzhou", "CN"),
    ("SZX", "Shenzhen Bao'an International", "Shenzhen", "CN"),
    ("CTU", "Chengdu Shuangliu International", "Chengdu", "CN"),
    ("HGH", "Hangzhou Xiaoshan International", "Hangzhou", "CN"),
    ("HKG", "Hong Kong International", "Hong Kong", "HK"),
    ("NRT", "Tokyo Narita International", "Tokyo", "JP"),
    ("HND", "Tokyo Haneda", "Tokyo", "JP"),
    ("ICN", "Seoul Incheon International", "Seoul", "KR"),
    ("SIN", "Singapore Changi", "Singapore", "SG"),
    ("LHR", "London Heathrow", "London", "GB"),
    ("FRA", "Frankfurt am Main", "Frankfurt", "DE"),
]
CITY_AIRPORTS: dict[str, list[str]] = {}
for _code, _name, _city, _country in AIRPORTS:
    CITY_AIRPORTS.setdefault(_city, []).append(_code)
AIRPORT_CITY = {code: city for code, _n, city, _c in AIRPORTS}

CARRIERS = [
    ("CA", "Air China"),
    ("MU", "China Eastern Airlines"),
    ("CZ", "China Southern Airlines"),
    ("HU", "Hainan Airlines"),
    ("3U", "Sichuan Airlines"),
    ("ZH", "Shenzhen Airlines"),
    ("CX", "Cathay Pacific"),
    ("NH", "All Nippon Airways"),
    ("KE", "Korean Air"),
    ("SQ", "Singapore Airlines"),
    ("BA", "British Airways"),
    ("LH", "Lufthansa"),
]
DOMESTIC_CARRIERS = ["CA", "MU", "CZ", "HU", "3U", "ZH"]

# city pair -> (block minutes, flights per direction per day, foreign carrier or None)
CITY_PAIRS: dict[tuple[str, str], tuple[int, int, str | None]] = {
    ("Beijing", "Shanghai"): (135, 10, None),
    ("Beijing", "Guangzhou"): (195, 8, None),
    ("Shanghai", "Shenzhen"): (150, 8, None),
    ("Beijing", "Chengdu"): (170, 6, None),
    ("Hangzhou", "Chengdu"): (160, 5, None),
    ("Shanghai", "Hong Kong"): (150, 4, "CX"),
    ("Shanghai", "Tokyo"): (190, 4, "NH"),
    ("Beijing", "Seoul"): (120, 3, "KE"),
    ("Guangzhou", "Singapore"): (260, 3, "SQ"),
    ("Beijing", "London"): (690, 2, "BA"),
    ("Shanghai", "Frankfurt"): (740, 2, "LH"),
}

# aircraft -> [(cabin, first row, last row, letter groups between aisles)]
AIRCRAFT: dict[str, list[tuple[str, int, int, tuple[str, ...]]]] = {
    "A320": [("business", 1, 2, ("AC", "DF")), ("economy", 3, 22, ("ABC", "DEF"))],
    "B738": [("business", 1, 2, ("AC", "DF")), ("economy", 3, 24, ("ABC", "DEF"))],
    "A333": [("business", 1, 4, ("AC", "DG", "HK")), ("economy", 5, 26, ("AC", "DEFG", "HK"))],
}

FIRST_NAMES = [
    "Wei",
    "Fang",
    "Lei",
    "Min",
    "Jing",
    "Tao",
    "Yan",
    "Hao",
    "Li",
    "Na",
    "Jun",
    "Xin",
    "Anna",
    "Ben",
    "Chloe",
    "David",
    "Emma",
    "Felix",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
]
LAST_NAMES = [
    "Wang",
    "Li",
    "Zhang",
    "Liu",
    "Chen",
    "Yang",
    "Huang",
    "Zhao",
    "Wu",
    "Zhou",
    "Xu",
    "Sun",
    "Muller",
    "Smith",
    "Tanaka",
    "Kim",
    "Garcia",
    "Novak",
    "Rossi",
    "Silva",
]
PNR_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
N_PASSENGERS = 24


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
CAPACITY = {
    (name, c): sum(1 for s in seats if s[3] == c) for name, seats in SEAT_MAPS.items() for c in CABINS
}


def hhmm(minutes: int) -> str:
    days, minutes = divmod(minutes, 24 * 60)
    return f"{minutes // 60:02d}:{minutes % 60:02d}" + (f"+{days}" if days else "")


def new_pnr(rng: np.random.Generator) -> str:
    return "".join(PNR_ALPHABET[i] for i in rng.integers(len(PNR_ALPHABET), size=6))


@dataclass
class World:
    """A generated world: its rows (by table) plus indexes that task generation reads."""

    seed: int
    days: int
    rows: dict[str, list[dict[str, Any]]]
    flights: dict[int, dict[str, Any]] = field(default_factory=dict)
    fares: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)
    occupied: dict[int, set[str]] = field(default_factory=dict)
    by_route: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)
    template: sqlite3.Connection | None = None
    # the template's pages as bytes: immutable, so copies need no lock
    image: bytes | None = None

    @cached_property
    def bookings(self) -> dict[str, dict[str, Any]]:
        return {b["pnr"]: b for b in self.rows["bookings"]}

    @cached_property
    def passenger_ids(self) -> frozenset[str]:
        return frozenset(p["id"] for p in self.rows["passengers"])

    @cached_property
    def balances(self) -> dict[str, int]:
        return {pm["id"]: pm["balance"] for pm in self.rows["payment_methods"]}

    @property
    def dates(self) -> list[str]:
        return [(START_DATE + timedelta(days=d)).isoformat() for d in range(self.days)]

    def free_seats(self, flight_id: int, cabin: str, position: str | None = None) -> list[str]:
        aircraft = self.flights[flight_id]["aircraft"]
        taken = self.occupied[flight_id]
        return [
            s[0]
            for s in SEAT_MAPS[aircraft]
            if s[3] == cabin and (position is None or s[4] == position) and s[0] not in taken
        ]

    def route_flights(self, origin: str, destination: str, day: str) -> list[int]:
        return self.by_route.get((origin, destination, day), [])


def generate_world(seed: int, days: int) -> World:
    """All rows of a world, from its seed alone (numpy's PCG64, so stable across platforms)."""
    rng = np.random.default_rng([seed, days, 7741])
    rows: dict[str, list[dict[str, Any]]] = {t: [] for t in m.Base.metadata.tables}
    rows["airports"] = [dict(code=c, name=n, city=city, country=k) for c, n, city, k in AIRPORTS]
    rows["carriers"] = [dict(code=c, name=n) for c, n in CARRIERS]
    rows["aircraft_seats"] = [
        dict(aircraft=a, seat_no=s, row=r, letter=ltr, cabin=c, position=p)
        for a, seats in SEAT_MAPS.items()
        for s, r, ltr, c, p in seats
    ]
    world = World(seed=seed, days=days, rows=rows)
    # a daily schedule per direction, flown every day with day-to-day fares and loads
    schedule = []
    used_numbers: set[str] = set()
    for (city_a, city_b), (block, per_day, foreign) in CITY_PAIRS.items():
        for origin_city, dest_city in ((city_a, city_b), (city_b, city_a)):
            slots = rng.choice(np.arange(6 * 12, 22 * 12), size=per_day, replace=False) * 5
            for slot in sorted(int(s) for s in slots):
                carriers = DOMESTIC_CARRIERS if foreign is None else [foreign, "CA", "MU"]
                carrier = carriers[int(rng.integers(len(carriers)))]
                number = f"{carrier}{int(rng.integers(1000, 9999))}"
                while number in used_numbers:
                    number = f"{carrier}{int(rng.integers(1000, 9999))}"
                used_numbers.add(number)
                schedule.append(
                    dict(
                        number=number,
                        carrier=carrier,
                        origin=str(rng.choice(CITY_AIRPORTS[origin_city])),
                        destination=str(rng.choice(CITY_AIRPORTS[dest_city])),
                        departs=slot,
                        block=block + int(rng.integers(-15, 16)),
                        aircraft="A333" if block > 400 else ("A320", "B738")[int(rng.integers(2))],
                        base=int(300 + block * 4.2 * (1.0 + 0.25 * rng.random())),
                    )
                )
    flight_id = 0
    for day in world.dates:
        for leg in schedule:
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
                fare = dict(
                    flight_id=flight_id,
                    cabin=cabin,
                    price=price,
                    refund_pct=int(rng.choice([0, 50, 75] if cabin == "economy" else [75, 90, 100])),
                    change_fee=int(rng.choice([100, 200, 300] if cabin == "economy" else [0, 100, 200])),
                )
                rows["fares"].append(fare)
                world.fares[(flight_id, cabin)] = fare
            taken: set[str] = set()
            for cabin in CABINS:
                cabin_seats = [s for s in SEAT_MAPS[leg["aircraft"]] if s[3] == cabin]
                load = 1.0 if rng.random() < 0.07 else 0.1 + 0.8 * rng.random()
                picks = rng.choice(len(cabin_seats), size=int(load * len(cabin_seats)), replace=False)
                for i in sorted(int(p) for p in picks):
                    seat_no, _row, _letter, _cabin, position = cabin_seats[i]
                    taken.add(seat_no)
                    rows["occupied_seats"].append(
                        dict(
                            flight_id=flight_id,
                            seat_no=seat_no,
                            cabin=cabin,
                            position=position,
                            source="presold",
                            pnr=None,
                        )
                    )
            world.occupied[flight_id] = taken
    _add_customers(world, rng)
    return world


def _add_customers(world: World, rng: np.random.Generator) -> None:
    """Passengers, their payment methods, and the trips half of them have already booked."""
    rows = world.rows
    domestic = [
        f
        for f in world.flights.values()
        if AIRPORT_CITY[f["origin"]] in CITY_AIRPORTS
        and f["origin"] in {"PEK", "PKX", "SHA", "PVG", "CAN", "SZX", "CTU", "HGH"}
        and f["destination"] in {"PEK", "PKX", "SHA", "PVG", "CAN", "SZX", "CTU", "HGH"}
    ]
    pnrs: set[str] = set()
    for i in range(N_PASSENGERS):
        pid = f"P{1001 + i}"
        first = FIRST_NAMES[int(rng.integers(len(FIRST_NAMES)))]
        last = LAST_NAMES[int(rng.integers(len(LAST_NAMES)))]
        rows["passengers"].append(
            dict(id=pid, name=f"{first} {last}", email=f"{first}.{last}{i}@example.com".lower())
        )
        card = dict(
            id=f"pm_card_{int(rng.integers(1000, 9999))}{i:02d}",
            passenger_id=pid,
            kind="card",
            label="credit card",
            opening_balance=int(rng.integers(30, 80)) * 1000,
        )
        wallet = dict(
            id=f"pm_wallet_{i + 1:02d}",
            passenger_id=pid,
            kind="wallet",
            label="travel wallet",
            opening_balance=int(rng.integers(3, 15)) * 1000,
        )
        for method in (card, wallet):
            method["balance"] = method["opening_balance"]
            rows["payment_methods"].append(method)
        if i % 2:
            continue
        # an existing trip: a seated domestic booking paid by card, not on the first flight of its day
        for _ in range(50):
            flight = domestic[int(rng.integers(len(domestic)))]
            cabin = "economy" if rng.random() < 0.75 else "business"
            free = world.free_seats(flight["id"], cabin)
            same_day = world.route_flights(flight["origin"], flight["destination"], flight["date"])
            if free and flight["departs"] > min(world.flights[f]["departs"] for f in same_day):
                break
        pnr = new_pnr(rng)
        while pnr in pnrs:
            pnr = new_pnr(rng)
        pnrs.add(pnr)
        seat_no = free[int(rng.integers(len(free)))]
        price = world.fares[(flight["id"], cabin)]["price"]
        position = SEAT_INFO[flight["aircraft"]][seat_no][4]
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
        rows["occupied_seats"].append(
            dict(
                flight_id=flight["id"],
                seat_no=seat_no,
                cabin=cabin,
                position=position,
                source="booking",
                pnr=pnr,
            )
        )
        world.occupied[flight["id"]].add(seat_no)
        rows["payments"].append(
            dict(
                id=len(rows["payments"]) + 1, pnr=pnr, payment_method_id=card["id"], kind="fare", amount=price
            )
        )
        card["balance"] -= price


# --- databases ---------------------------------------------------------------------------------
def new_engine() -> Any:
    """An engine bound to one private in-memory SQLite connection (the episode's database)."""
    return create_engine("sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False})


def load_rows(conn: Connection, world: World) -> None:
    """Bulk-load a world with executemany, table by table in dependency order."""
    for table in m.Base.metadata.sorted_tables:
        if world.rows[table.name]:
            conn.execute(insert(table), world.rows[table.name])


def build_template(world: World) -> sqlite3.Connection:
    engine = new_engine()
    m.Base.metadata.create_all(engine)
    with engine.begin() as conn:
        load_rows(conn, world)
    raw = engine.raw_connection().driver_connection
    assert isinstance(raw, sqlite3.Connection)
    return raw


def build_row_by_row(world: World, engine: Any) -> None:
    """The naive way to set up an episode: schema and every row through the ORM (bench baseline)."""
    m.Base.metadata.drop_all(engine)
    m.Base.metadata.create_all(engine)
    models = {mapper.local_table.name: mapper.class_ for mapper in m.Base.registry.mappers}
    with Session(engine) as session:
        for table in m.Base.metadata.sorted_tables:
            for row in world.rows[table.name]:
                session.add(models[table.name](**row))
            session.flush()
        session.commit()


class WorldCache:
    """LRU of generated worlds with their template databases, shared by every env in a process."""

    def __init__(self, maxsize: int = 16) -> None:
        self.maxsize = maxsize
        self._worlds: OrderedDict[tuple[int, int], World] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, seed: int, days: int) -> World:
        key = (seed, days)
        with self._lock:
            world = self._worlds.get(key)
            if world is not None:
                self._worlds.move_to_end(key)
                return world
        world = generate_world(seed, days)
        world.template = build_template(world)
        if hasattr(world.template, "serialize"):
            world.image = world.template.serialize()
        with self._lock:
            self._worlds[key] = world
            while len(self._worlds) > self.maxsize:
                self._worlds.popitem(last=False)
        return world

    def copy_into(self, world: World, target: sqlite3.Connection) -> None:
        """Overwrite `target` with the world's template, all pages at once."""
        if world.image is not None:
            target.deserialize(world.image)  # ~7x faster than backup() on a 30-day world
            return
        assert world.template is not None
        with self._lock:
            world.template.backup(target)


WORLDS = WorldCache()


def fingerprint(conn: Connection) -> str:
    """A hash of every row of every table, ordered by primary key: equal iff the databases are."""
    digest = hashlib.sha256()
    for table in m.Base.metadata.sorted_tables:
        digest.update(table.name.encode())
        for row in conn.execute(select(table).order_by(*table.primary_key.columns)):
            digest.update(repr(tuple(row)).encode())
    return digest.hexdigest()
