"""Generating a flight world from its key (split, index, days, variant), in plain rows.

A world is a pure function of its key: its own start date, city pair (one of the
split's), schedule, fares, seat maps and customers. The pair is flown mostly on its trunk, the
route between the two cities' main airports, about 35 times a day each way, and more thinly to
and from a second airport at lower fares. Requests are about trunks, and the trips customers have
already booked are on them: a request's exact route then has enough flights that no place of an
order blind to its constraints (the route's 2nd cheapest, 3rd earliest, ...) holds the answer
often (see `draws.py`), where a route of four flights a day gave it away at the 2nd place. One
pair a world keeps the rows (and so the cost of each episode's copy) about what four thinly flown
pairs had.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

import numpy as np

from agentrl.flights import models as m
from agentrl.flights.geography import (
    AIRPORTS,
    CARRIERS,
    CITY_AIRPORTS,
    CITY_PAIRS,
    FIRST_NAMES,
    LAST_NAMES,
    PASSENGER_IDS,
    SPLIT_NAMES,
)
from agentrl.flights.world import CABINS, POSITIONS, SEAT_ARRAYS, SEAT_INFO, SEAT_MAPS, World, hhmm, new_pnr

START_DATE = date(2026, 3, 2)
PAIRS_PER_WORLD = 1
TRUNK_LEGS = (34, 40)  # legs a day each way between the pair's main airports: fewest, most
SIDE_DISCOUNT = 0.8  # fares off the trunk are lower on average, as at a second airport
N_PASSENGERS = 40
# every passenger's payment methods: kind, label, opening balance in thousands (low, high: excluded)
PAYMENT_METHODS = (("card", "credit card", (60, 120)), ("wallet", "travel wallet", (3, 15)))


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
                kinds, rows_of = SEAT_ARRAYS[(leg["aircraft"], cabin)]
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
        card, wallet = (
            dict(
                id=f"pm_{kind}_{int(method_numbers[2 * i + k])}",
                passenger_id=pid,
                kind=kind,
                label=label,
                opening_balance=int(rng.integers(*thousands)) * 1000,
            )
            for k, (kind, label, thousands) in enumerate(PAYMENT_METHODS)
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

