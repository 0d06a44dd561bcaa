"""Seeded booking requests, and the verifier that judges an episode's final database.

A task is generated from its world's rows (never from SQL) together with its expected outcome.
Each family has three levels; a generator retries with fresh draws until the answer is unique
(no price or time ties), so "exactly right" is well defined. The verifier compares the final
database to the template plus the expected changes plus what other customers did meanwhile:
any stray booking, missing refund or overcharge scores 0.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from agentrl.flights import models as m
from agentrl.flights.world import CABINS, POSITIONS, SEAT_INFO, World, hhmm

FAMILIES = ("cheapest", "seat", "budget", "no_flight", "cancel_rebook", "change_earlier", "multi_pax")
LEVELS = (1, 2, 3)
SPLITS = {"train": (0, 1_000_000), "test": (1_000_000, 2_000_000)}
ROUTE_AIRPORTS = ("PEK", "PKX", "SHA", "PVG", "CAN", "SZX", "CTU", "HGH", "HKG", "NRT", "HND", "ICN", "SIN")
# a finish message that reports failure to find a flight
NEGATIVE = re.compile(r"\b(no|none|not|cannot|can't|unable|unavailable|nothing)\b", re.IGNORECASE)


@dataclass
class Expected:
    """What the final database must show, beyond the template and other customers' purchases."""

    new: list[tuple[str, int, str, int]] = field(default_factory=list)  # passenger, flight, cabin, price
    position: str | None = None
    payment_method_id: str | None = None
    cancel: tuple[str, int] | None = None  # pnr, refund
    change: tuple[str, int, int, int] | None = None  # pnr, new flight, change fee, fare difference
    no_flight: bool = False


@dataclass
class Task:
    family: str
    level: int
    seed: int
    text: str
    request: dict[str, Any]
    expected: Expected
    fare_change: tuple[int, str, int] | None = None  # flight, cabin, new price, applied on first booking

    @property
    def target_flights(self) -> set[int]:
        flights = {f for _p, f, _c, _x in self.expected.new}
        if self.expected.change:
            flights.add(self.expected.change[1])
        return flights


class _Retry(Exception):
    """This draw gives no unique answer; draw again."""


# (world seed, days) -> the routes tasks are drawn from; a world is a pure function of its key
_TASK_ROUTES: dict[tuple[int, int], tuple[tuple[str, str, str], ...]] = {}


def task_routes(world: World) -> tuple[tuple[str, str, str], ...]:
    """The (origin, destination, day) keys tasks may use, sorted; computed once per world."""
    key = (world.seed, world.days)
    routes = _TASK_ROUTES.get(key)
    if routes is None:
        routes = tuple(sorted(k for k in world.by_route if k[0] in ROUTE_AIRPORTS and k[1] in ROUTE_AIRPORTS))
        _TASK_ROUTES[key] = routes
    return routes


class _Picker:
    """Candidate search over the world's rows, with the task's fare change applied."""

    def __init__(self, world: World, rng: np.random.Generator) -> None:
        self.world, self.rng = world, rng
        self.price_override: dict[tuple[int, str], int] = {}

    def price(self, flight_id: int, cabin: str) -> int:
        return self.price_override.get((flight_id, cabin), self.world.fares[(flight_id, cabin)]["price"])

    def candidates(
        self,
        origin: str,
        destination: str,
        day: str,
        cabin: str,
        after: str = "00:00",
        before: str = "23:59",
        max_price: int | None = None,
        seats: int = 1,
        position: str | None = None,
        exclude: int | None = None,
    ) -> list[int]:
        found = []
        for fid in self.world.route_flights(origin, destination, day):
            f = self.world.flights[fid]
            if fid == exclude or not after <= f["departs"] <= before:
                continue
            if max_price is not None and self.price(fid, cabin) > max_price:
                continue
            if len(self.world.free_seats(fid, cabin)) < seats:
                continue
            if position and not self.world.free_seats(fid, cabin, position):
                continue
            found.append(fid)
        return found

    def best(self, flights: list[int], cabin: str, choose: str) -> int:
        if not flights:
            raise _Retry
        if choose == "earliest":
            return min(flights, key=lambda f: self.world.flights[f]["departs"])
        prices = sorted(self.price(f, cabin) for f in flights)
        if len(prices) > 1 and prices[0] == prices[1]:
            raise _Retry
        return min(flights, key=lambda f: self.price(f, cabin))

    def choice(self, items: list[Any] | tuple[Any, ...]) -> Any:
        return items[int(self.rng.integers(len(items)))]

    def route(self) -> tuple[str, str, str]:
        return self.choice(task_routes(self.world))

    def window(self, level: int) -> tuple[str, str]:
        if level == 1:
            return "00:00", "23:59"
        width = (8 if level == 2 else 5) * 60
        start = int(self.rng.integers(6 * 12, 17 * 12)) * 5
        return hhmm(start), hhmm(min(start + width, 23 * 60 + 59))


def generate_task(world: World, family: str, level: int, seed: int, fare_changes: bool) -> Task:
    if family not in FAMILIES:
        raise ValueError(f"unknown task family {family!r}; choose from {FAMILIES}")
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}")
    rng = np.random.default_rng([seed, LEVELS.index(level), FAMILIES.index(family), 99])
    for _ in range(500):
        picker = _Picker(world, rng)
        try:
            return _GENERATORS[family](picker, level, seed, fare_changes)
        except _Retry:
            continue
    raise RuntimeError(f"could not generate a {family} task at level {level} for seed {seed}")


def _passenger(picker: _Picker, with_booking: bool | None = None) -> dict[str, Any]:
    booked = {b["passenger_id"] for b in picker.world.rows["bookings"]}
    people = [
        p
        for p in picker.world.rows["passengers"]
        if with_booking is None or (p["id"] in booked) == with_booking
    ]
    return picker.choice(people)


def _card(world: World, passenger_id: str) -> dict[str, Any]:
    return next(
        pm
        for pm in world.rows["payment_methods"]
        if pm["passenger_id"] == passenger_id and pm["kind"] == "card"
    )


def _bump(picker: _Picker, fare_changes: bool, flight_id: int, cabin: str) -> tuple[int, str, int] | None:
    """A fare rise on the would-be answer, so an agent acting on stale prices gets it wrong."""
    if not fare_changes:
        return None
    new = int(round(picker.price(flight_id, cabin) * (1.2 + 0.3 * picker.rng.random()), -1))
    picker.price_override[(flight_id, cabin)] = new
    return flight_id, cabin, new


def _book_task(picker: _Picker, family: str, level: int, seed: int, fare_changes: bool) -> Task:
    """cheapest / seat / budget / multi_pax / no_flight: one new purchase (or none) on a route."""
    world = picker.world
    origin, destination, day = picker.route()
    cabin = "economy" if level == 1 else picker.choice(CABINS)
    after, before = picker.window(level)
    choose, position, max_price, seats, number = "cheapest", None, None, 1, None
    if family == "seat":
        position = picker.choice(("window", "aisle"))
        if level == 1:
            number = world.flights[picker.choice(world.route_flights(origin, destination, day))]["number"]
    elif family == "budget":
        choose = "earliest"
        prices = sorted(
            picker.price(f, cabin) for f in picker.candidates(origin, destination, day, cabin, after)
        )
        if len(prices) < 2:
            raise _Retry
        max_price = prices[0] + int((prices[-1] - prices[0]) * (0.8 if level == 1 else 0.35))
        before = "23:59"
    elif family == "multi_pax":
        seats = level + 1
    passengers = [_passenger(picker)]
    while len(passengers) < seats:
        other = _passenger(picker)
        if other["id"] not in {p["id"] for p in passengers}:
            passengers.append(other)
    payer = _card(world, passengers[0]["id"])

    def answer() -> int:
        found = picker.candidates(origin, destination, day, cabin, after, before, max_price, seats, position)
        if number:
            found = [f for f in found if world.flights[f]["number"] == number]
        return picker.best(found, cabin, choose)

    if family == "no_flight":
        everything = picker.candidates(origin, destination, day, cabin, after, before)
        if level == 2:  # a window with no departures at all on this exact route
            times = sorted(world.flights[f]["departs"] for f in world.route_flights(origin, destination, day))
            gaps = [(a, b) for a, b in itertools.pairwise(times) if _minutes(b) - _minutes(a) >= 100]
            if not gaps:
                raise _Retry
            a, b = picker.choice(gaps)
            after, before = hhmm(_minutes(a) + 30), hhmm(_minutes(b) - 30)
        else:  # a budget under every fare in the window
            if not everything:
                raise _Retry
            max_price = min(picker.price(f, cabin) for f in everything) - 10 * int(picker.rng.integers(1, 20))
            if max_price <= 0:
                raise _Retry
        if picker.candidates(origin, destination, day, cabin, after, before, max_price):
            raise _Retry
        change = _bump(picker, fare_changes, everything[0], cabin) if everything else None
        expected = Expected(no_flight=True)
    else:
        target = answer()
        change = _bump(picker, fare_changes, target, cabin)
        target = answer()
        price = picker.price(target, cabin)
        if payer["balance"] < price * seats:
            raise _Retry
        expected = Expected(
            new=[(p["id"], target, cabin, price) for p in passengers],
            position=position,
            payment_method_id=payer["id"],
        )
    request = dict(
        family=family,
        level=level,
        action="book",
        passengers=[p["id"] for p in passengers],
        payment_method_id=payer["id"],
        origin=origin,
        destination=destination,
        date=day,
        cabin=cabin,
        depart_after=after,
        depart_before=before,
        max_price=max_price,
        seat_position=position,
        flight_number=number,
        choose=choose,
        pnr=None,
    )
    return Task(family, level, seed, _describe(request, world), request, expected, change)


def _existing_task(picker: _Picker, family: str, level: int, seed: int, fare_changes: bool) -> Task:
    """cancel_rebook / change_earlier: start from a trip the passenger already booked."""
    world = picker.world
    passenger = _passenger(picker, with_booking=True)
    booking = next(b for b in world.rows["bookings"] if b["passenger_id"] == passenger["id"])
    old = world.flights[booking["flight_id"]]
    cabin, pm = booking["cabin"], booking["payment_method_id"]
    old_rules = world.fares[(old["id"], cabin)]
    position = picker.choice(("window", "aisle")) if level == 3 else None
    request = dict(
        family=family,
        level=level,
        passengers=[passenger["id"]],
        payment_method_id=pm,
        origin=old["origin"],
        destination=old["destination"],
        cabin=cabin,
        max_price=None,
        seat_position=position,
        flight_number=None,
        pnr=booking["pnr"],
    )
    if family == "cancel_rebook":
        day = picker.choice(world.dates)
        after, before = picker.window(level)
        args = (old["origin"], old["destination"], day, cabin, after, before, None, 1, position, old["id"])
        target = picker.best(picker.candidates(*args), cabin, "cheapest")
        change = _bump(picker, fare_changes, target, cabin)
        target = picker.best(picker.candidates(*args), cabin, "cheapest")
        refund = booking["fare_paid"] * old_rules["refund_pct"] // 100
        expected = Expected(
            new=[(passenger["id"], target, cabin, picker.price(target, cabin))],
            position=position,
            payment_method_id=pm,
            cancel=(booking["pnr"], refund),
        )
        request.update(
            action="cancel_and_book", date=day, depart_after=after, depart_before=before, choose="cheapest"
        )
    else:
        after = (
            "00:00" if level == 1 else hhmm(_minutes(old["departs"]) - int(picker.rng.integers(2, 7)) * 60)
        )
        before = hhmm(_minutes(old["departs"]) - 1)
        args = (old["origin"], old["destination"], old["date"], cabin, after, before, None, 1, position)
        target = picker.best(picker.candidates(*args), cabin, "earliest")
        change = _bump(picker, fare_changes, target, cabin)
        difference = max(0, picker.price(target, cabin) - booking["fare_paid"])
        expected = Expected(
            position=position,
            payment_method_id=pm,
            change=(booking["pnr"], target, old_rules["change_fee"], difference),
        )
        request.update(
            action="change", date=old["date"], depart_after=after, depart_before=before, choose="earliest"
        )
    return Task(family, level, seed, _describe(request, world), request, expected, change)


_GENERATORS = {
    "cheapest": lambda p, lv, s, fc: _book_task(p, "cheapest", lv, s, fc),
    "seat": lambda p, lv, s, fc: _book_task(p, "seat", lv, s, fc),
    "budget": lambda p, lv, s, fc: _book_task(p, "budget", lv, s, fc),
    "no_flight": lambda p, lv, s, fc: _book_task(p, "no_flight", lv, s, fc),
    "multi_pax": lambda p, lv, s, fc: _book_task(p, "multi_pax", lv, s, fc),
    "cancel_rebook": lambda p, lv, s, fc: _existing_task(p, "cancel_rebook", lv, s, fc),
    "change_earlier": lambda p, lv, s, fc: _existing_task(p, "change_earlier", lv, s, fc),
}


def _minutes(t: str) -> int:
    return int(t[:2]) * 60 + int(t[3:5])


def _describe(r: dict[str, Any], world: World) -> str:
    """The request as a customer would write it."""
    names = {p["id"]: p["name"] for p in world.rows["passengers"]}
    who = " and ".join(f"{names[p]} (passenger {p})" for p in r["passengers"])
    window = (
        ""
        if (r["depart_after"], r["depart_before"]) == ("00:00", "23:59")
        else f", departing between {r['depart_after']} and {r['depart_before']}"
    )
    article = "an" if (r["seat_position"] or "").startswith("a") else "a"
    seat = f" with {article} {r['seat_position']} seat" if r["seat_position"] else ""
    budget = f" costing at most {r['max_price']} CNY per person" if r["max_price"] is not None else ""
    pay = f"Charge payment method {r['payment_method_id']}."
    route = f"from {r['origin']} to {r['destination']} on {r['date']}"
    if r["action"] == "change":
        return (
            f"I am {who}. Please change my booking {r['pnr']} to the earliest {r['cabin']} flight on the "
            f"same route and day that departs before my current flight{window}{seat}. {pay}"
        )
    if r["action"] == "cancel_and_book":
        return (
            f"I am {who}. Please cancel my booking {r['pnr']}, then book me the cheapest {r['cabin']} "
            f"flight {route}{window}{seat} instead (not the flight I cancelled). {pay}"
        )
    if r["flight_number"]:
        what = f"flight {r['flight_number']} {route} in {r['cabin']}"
    else:
        what = f"the {r['choose']} {r['cabin']} flight {route}{window}{budget}"
    tail = " If no flight fits, do not book anything and tell me so." if r["family"] != "multi_pax" else ""
    return f"Hello, this is for {who}. Please book {what}{seat}, one seat each. {pay}{tail}"


# --- verification --------------------------------------------------------------------------------
def verify(session: Session, world: World, task: Task, finish_message: str | None) -> bool:
    """1 iff the final database is the template plus exactly the expected changes (plus churn)."""
    exp = task.expected
    if exp.no_flight and (finish_message is None or not NEGATIVE.search(finish_message)):
        return False
    bookings = {b.pnr: b for b in session.execute(select(m.Booking.__table__))}
    template = world.bookings
    balance_delta: dict[str, int] = {}
    for pnr, row in template.items():
        now = bookings.get(pnr)
        if now is None:
            return False
        want = dict(row)
        if exp.cancel and pnr == exp.cancel[0]:
            want["status"] = "cancelled"
            balance_delta[row["payment_method_id"]] = (
                balance_delta.get(row["payment_method_id"], 0) + exp.cancel[1]
            )
        if exp.change and pnr == exp.change[0]:
            _pnr, flight, fee, diff = exp.change
            want.update(flight_id=flight, fare_paid=row["fare_paid"] + diff, seat_no=now.seat_no)
            balance_delta[row["payment_method_id"]] = (
                balance_delta.get(row["payment_method_id"], 0) - fee - diff
            )
            if not _seat_ok(world, flight, now.cabin, now.seat_no, exp.position):
                return False
        if any(getattr(now, k) != v for k, v in want.items()):
            return False
    new = sorted(
        (b.passenger_id, b.flight_id, b.cabin, b.fare_paid, b.payment_method_id, b.status)
        for pnr, b in bookings.items()
        if pnr not in template
    )
    want_new = sorted((p, f, c, price, exp.payment_method_id, "confirmed") for p, f, c, price in exp.new)
    if new != want_new:
        return False
    for pnr, b in bookings.items():
        if pnr not in template:
            if not _seat_ok(world, b.flight_id, b.cabin, b.seat_no, exp.position):
                return False
            balance_delta[b.payment_method_id] = balance_delta.get(b.payment_method_id, 0) - b.fare_paid
    start = world.balances
    return all(
        balance == start[pm_id] + balance_delta.get(pm_id, 0)
        for pm_id, balance in session.execute(select(m.PaymentMethod.id, m.PaymentMethod.balance))
    )


def _seat_ok(world: World, flight_id: int, cabin: str, seat_no: str, position: str | None) -> bool:
    seat = SEAT_INFO[world.flights[flight_id]["aircraft"]].get(seat_no)
    return seat is not None and seat[3] == cabin and (position is None or seat[4] == position)


assert set(POSITIONS) >= {"window", "aisle"}
