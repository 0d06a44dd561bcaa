"""Seeded customer requests with their expected outcome, drawn from a world's rows (never SQL).

Every family's request can turn out three ways: "done" (exactly one right change exists),
"infeasible" (no flight satisfies it) or "refused" (the desk policy forbids it). The outcome is
planned first, at a fixed rate per block of 40 seeds, and the request's parameters are then drawn
from one outcome-independent distribution until the world gives that outcome, so the text never
tells the outcome. Draws are also rejected unless the answer has real rivals: at least two
flights of the exact route fit the request, and the answer differs from what a city-level or
constraint-blind reading would pick. Every request, at every level, has constraints that decide:
wherever there is an answer (done and refused requests), the exact route's cheapest, its earliest
and its latest flight ignoring the window, budget, seat and "earliest" (what the coarse macros
called with their required arguments only pick, too), and the first flight a search lists, are
all wrong.

Ruling out the first place of a blind order moves the answer to the next place unless the route
has many flights and the answer's place is spread over them. Requests are about a world's trunks
(about 35 flights a day each way, see `world.py`), windows are narrow (4, 3, 2 hours at levels 1,
2, 3), and each task draws a place before its parameters: the answer must stand at that place or
later in the blind order of its own objective (by price for "cheapest", by departure for
"earliest"), the place uniform over the first `SPREAD` of the route's bookable flights. A window
holds the cheap flights of its hours, so the cheapest in it is mostly among the route's first few
by price; the drawn place lifts it up the order without pointing anywhere (a floor, not a target:
far fewer draws are rejected, and no place holds the answer more often than 1 / the number of
places). The other blind orders (by departure for "cheapest", by price for "earliest", the
search's listing) are spread by the windows' positions and by the price draws. Each place k of
each order then holds the answer of a few tasks in a hundred (`tests/flights/test_flights_hacks.py`
plays the 2nd-5th cheapest and earliest, 1st-3rd latest and dearest).

In the moving world (`fare_changes`), the first write meets a fare rise on one of the flights the
route's search lists, drawn uniformly, independent of the answer; the answer is settled on the
risen fares.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np

from agentrl.flights.geography import SPLIT_NAMES
from agentrl.flights.task_ids import keyed_id
from agentrl.flights.text import CANCEL_NOTICE_HOURS, MAX_PASSENGERS, describe
from agentrl.flights.world import CABINS, WORLDS, World, departure, hhmm, minutes

FAMILIES = ("cheapest", "seat", "budget", "multi_pax", "cancel_rebook", "change_earlier")
LEVELS = (1, 2, 3)
SPLITS = SPLIT_NAMES
# per block of OUTCOME_BLOCK consecutive seeds of a family: this many infeasible, this many refused
OUTCOME_BLOCK, N_INFEASIBLE, N_REFUSED = 40, 5, 4
ATTEMPTS, MAX_VARIANTS = 400, 64  # a high drawn floor at the widest window can take a few dozen worlds
STRICT_SHARE = 0.75  # of seat and budget tasks whose pick blind to their own constraint must be wrong
SPREAD = 0.6  # the share of a route's bookable flights whose places the answer's floor is drawn from
WINDOW_HOURS = (4, 3, 2)  # width of the departure window per level


@dataclass
class Expected:
    """What the final database must show, beyond the template and other customers' purchases."""

    new: list[tuple[str, int, str, int]] = field(default_factory=list)  # passenger, flight, cabin, price
    position: str | None = None
    payment_method_id: str | None = None
    cancel: tuple[str, int] | None = None  # pnr, refund
    change: tuple[str, int, int, int] | None = None  # pnr, new flight, change fee, fare difference


@dataclass(kw_only=True)
class Task:
    """One customer request of a world and what settles it; built by keyword, as a dozen fields in a row
    are easily swapped."""

    family: str
    level: int
    index: int
    split: str
    outcome: str  # done | infeasible | refused
    reason: str  # why: the family's objective, or the cause of infeasibility or refusal
    text: str
    request: dict[str, Any]
    route: tuple[str, str, str]  # the exact route and day the request is about
    expected: Expected
    fare_change: tuple[int, str, int] | None = None  # flight, cabin, new price, on the first write
    target: int | None = None
    variant: int = 0  # of the seed's world (see `make_task`)

    def task_id(self, days: int, fare_changes: bool, key: bytes) -> str:
        """An opaque name of this task, stable under one key: a keyed hash (see `task_ids.py`)."""
        return keyed_id(key, self.split, self.family, self.level, self.index, days, int(fare_changes))

    def privileged(self) -> dict[str, Any]:
        """Everything about the task, for operators (oracle analysis, SFT export, debugging)."""
        return {
            "family": self.family,
            "level": self.level,
            "index": self.index,
            "outcome": self.outcome,
            "reason": self.reason,
            "target_flight": self.target,
            "request": dict(self.request),
            "text": self.text,
        }


def planned_outcome(split: str, family: str, index: int) -> str:
    """The outcome of seed `index`: a seeded permutation per block gives exact rates per block."""
    rng = np.random.default_rng([index // OUTCOME_BLOCK, FAMILIES.index(family), SPLITS.index(split), 4242])
    slot = int(rng.permutation(OUTCOME_BLOCK)[index % OUTCOME_BLOCK])
    return "infeasible" if slot < N_INFEASIBLE else "refused" if slot < N_INFEASIBLE + N_REFUSED else "done"


class NoTask(Exception):
    """A world cannot host the planned task (too few flights on its routes, say)."""


class _Retry(Exception):
    """This draw does not give the planned outcome with real rivals; draw again."""


class _Draw:
    """One attempt at a task: parameter draws and candidate search, with a fare change applied."""

    def __init__(
        self, world: World, rng: np.random.Generator, level: int, outcome: str, strict: bool, place: float
    ) -> None:
        self.world, self.rng, self.level, self.outcome = world, rng, level, outcome
        self.strict = strict  # ask for the family's own distractor too (most tasks)
        self.place = place  # where the answer stands in its objective's blind order, as a share
        self.price_override: dict[tuple[int, str], int] = {}
        self.fitting: list[int] = []  # the exact-route flights that fit, as of the last `settle`

    def price(self, flight_id: int, cabin: str) -> int:
        listed: int = self.world.fares[(flight_id, cabin)]["price"]
        return self.price_override.get((flight_id, cabin), listed)

    def choice(self, items: list[Any] | tuple[Any, ...]) -> Any:
        if not items:
            raise _Retry
        return items[int(self.rng.integers(len(items)))]

    def route(self) -> tuple[str, str, str]:
        return self.choice(self.world.task_routes)

    def cabin(self) -> str:
        return "economy" if self.level == 1 else self.choice(CABINS)

    def window(self, route: tuple[str, str, str]) -> tuple[str, str]:
        """A departure window (narrower at higher levels), opening up to half its width before a
        flight of the city pair."""
        width = WINDOW_HOURS[self.level - 1] * 60
        flights = self.flights(*route, citywide=True)
        anchor = minutes(self.world.flights[self.choice(flights)]["departs"]) if flights else 12 * 60
        start = max(5 * 60, anchor - int(self.rng.integers(0, width // 10)) * 5)
        return hhmm(start), hhmm(min(start + width, 23 * 60 + 59))

    def flights(self, origin: str, destination: str, day: str, citywide: bool = False) -> list[int]:
        if not citywide:
            return self.world.route_flights(origin, destination, day)
        return self.world.city_flights(origin, destination, day)

    def fits(self, fid: int, c: dict[str, Any]) -> bool:
        """Does flight `fid` satisfy the constraints `c` (the request's hard conditions)?"""
        f = self.world.flights[fid]
        if fid == c.get("exclude") or not c["after"] <= f["departs"] <= c["before"]:
            return False
        if c.get("max_price") is not None and self.price(fid, c["cabin"]) > c["max_price"]:
            return False
        free = self.world.free_counts[(fid, c["cabin"])]
        if sum(free.values()) < c.get("seats", 1):
            return False
        return not c.get("position") or free[c["position"]] > 0

    def best(self, flights: list[int], cabin: str, choose: str) -> int:
        if choose == "earliest":
            return min(flights, key=lambda f: self.world.flights[f]["departs"])
        prices = sorted(self.price(f, cabin) for f in flights)
        if len(prices) > 1 and prices[0] == prices[1]:
            raise _Retry  # a tie: "the cheapest" would not name one flight
        return min(flights, key=lambda f: self.price(f, cabin))

    def settle(
        self, route: tuple[str, str, str], c: dict[str, Any], choose: str, city_lure: bool
    ) -> int | None:
        """The answer on the exact route, or None if there is none; `_Retry` unless rivals exist."""
        exact = [f for f in self.flights(*route) if self.fits(f, c)]
        self.fitting = exact
        if len(exact) == 1:
            raise _Retry  # the answer must not be the only flight that fits
        lures = [f for f in self.world.other_flights(*route) if self.fits(f, c)] if city_lure else []
        if not exact:
            if city_lure and not lures:
                raise _Retry  # an infeasible request must tempt a city-level reading
            return None
        target = self.best(exact, c["cabin"], choose)
        if city_lure and self.best(exact + lures, c["cabin"], choose) == target:
            raise _Retry  # a city-level reading must pick another flight
        return target

    def bump(self, route: tuple[str, str, str], cabin: str) -> tuple[int, str, int] | None:
        """A fare rise applied on the first booking or change, so stale prices mislead: on one of
        the flights the route's search lists, drawn uniformly (the answer is settled after it)."""
        listed = self.flights(*route, citywide=True)
        if not listed:
            return None
        flight_id = listed[int(self.rng.integers(len(listed)))]
        new = int(round(self.price(flight_id, cabin) * (1.2 + 0.3 * self.rng.random()), -1))
        self.price_override[(flight_id, cabin)] = new
        return flight_id, cabin, new

    def decide(
        self,
        route: tuple[str, str, str],
        cabin: str,
        seats: int,
        target: int,
        choose: str,
        exclude: int | None = None,
    ) -> None:
        """`_Retry` unless the constraints decide: the route's cheapest, earliest and latest flight
        that could seat the party (whatever the window, budget, seat type or "earliest"), and the
        first flight the search lists, are all another flight than the answer; and unless the answer
        stands at the task's drawn place or later in the blind order of its objective (by price for
        "cheapest", by departure for "earliest")."""
        listed = sorted(self.flights(*route, citywide=True), key=lambda f: self.world.flights[f]["number"])
        bookable = [
            f
            for f in self.flights(*route)
            if f != exclude and sum(self.world.free_counts[(f, cabin)].values()) >= seats
        ]
        flights = self.world.flights
        blind = {
            min(bookable, key=lambda f: (self.price(f, cabin), flights[f]["departs"])),
            min(bookable, key=lambda f: flights[f]["departs"]),
            max(bookable, key=lambda f: flights[f]["departs"]),
            listed[0],
        }
        if target in blind:
            raise _Retry
        if choose == "earliest":
            order = sorted(bookable, key=lambda f: flights[f]["departs"])
        else:
            order = sorted(bookable, key=lambda f: (self.price(f, cabin), flights[f]["departs"]))
        places = max(1, int(SPREAD * len(order)) - 1)  # floors 2, 3, ... (place 1 is ruled out above)
        if order.index(target) < 1 + int(self.place * places):
            raise _Retry

    def match(self, natural: str) -> None:
        if natural != self.outcome:
            raise _Retry


def generate_task(world: World, family: str, level: int, index: int, fare_changes: bool) -> Task:
    if family not in FAMILIES:
        raise ValueError(f"unknown task family {family!r}; choose from {FAMILIES}")
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}")
    outcome = planned_outcome(world.split, family, index)
    rng = np.random.default_rng([index, level, FAMILIES.index(family), SPLITS.index(world.split), 99])
    generator = _existing_task if family in ("cancel_rebook", "change_earlier") else _book_task
    strict = rng.random() < STRICT_SHARE
    place = rng.random()
    for _ in range(ATTEMPTS):
        try:
            task = generator(_Draw(world, rng, level, outcome, strict, place), family, index, fare_changes)
        except _Retry:
            continue
        task.variant = world.variant
        return task
    raise NoTask(f"world {world.key} hosts no {outcome} {family} task at level {level}")


def make_task(
    split: str,
    index: int,
    days: int,
    family: str,
    level: int,
    fare_changes: bool,
    get_world: Callable[[str, int, int, int], World] = WORLDS.get,
) -> tuple[World, Task]:
    """Seed `index`'s world and task; the rare seed whose world cannot host it moves to a spare.

    `get_world` is the cache by default; `generate_world` gives the same tasks without databases.
    """
    for variant in range(MAX_VARIANTS):
        world = get_world(split, index, days, variant)
        try:
            return world, generate_task(world, family, level, index, fare_changes)
        except NoTask:
            continue
    raise RuntimeError(f"no world of seed {index} hosts a {family} task at level {level}")


def _others(world: World, exclude: set[str]) -> list[dict[str, Any]]:
    return [p for p in world.rows["passengers"] if p["id"] not in exclude]


def _book_task(draw: _Draw, family: str, index: int, fare_changes: bool) -> Task:
    """cheapest / seat / budget / multi_pax: one new purchase on an exact route, for 1-5 people."""
    world, level = draw.world, draw.level
    route = draw.route()
    cabin, (after, before) = draw.cabin(), draw.window(route)
    c: dict[str, Any] = dict(cabin=cabin, after=after, before=before)
    choose, reason = "cheapest", family
    refusal = None
    if draw.outcome == "refused":
        refusal = "group_size" if family == "multi_pax" and draw.rng.random() < 0.5 else "foreign_payment"
    if family == "seat":
        c["position"] = draw.choice(("window", "aisle"))
    elif family == "budget":
        choose = "earliest"
        window = [
            f for f in draw.flights(*route, citywide=True) if after <= world.flights[f]["departs"] <= before
        ]
        prices = sorted(draw.price(f, cabin) for f in window)
        if len(prices) < 2:
            raise _Retry
        c["max_price"] = int(
            round(prices[0] + (prices[-1] - prices[0]) * (0.15 + 0.7 * draw.rng.random()), -1)
        )
    elif family == "multi_pax":
        c["seats"] = (2, draw.choice((2, 3)), 3)[level - 1]
        if refusal == "group_size":
            c["seats"] = MAX_PASSENGERS + draw.choice((1, 2))
    change = draw.bump(route, cabin) if fare_changes else None
    target = draw.settle(route, c, choose, city_lure=True)
    if target is not None:
        draw.decide(route, cabin, c.get("seats", 1), target, choose)
    if target is not None and draw.strict:
        _distractor(draw, family, route, c, target)
    draw.match("refused" if refusal and target is not None else "infeasible" if target is None else "done")
    seats = c.get("seats", 1)
    passengers = [draw.choice(world.rows["passengers"])]
    while len(passengers) < seats:
        other = draw.choice(world.rows["passengers"])
        if other not in passengers:
            passengers.append(other)
    ids = {p["id"] for p in passengers}
    owner = passengers[0] if refusal != "foreign_payment" else draw.choice(_others(world, ids))
    # always a card, whoever owns it: a wallet would be drawn less often where money must suffice
    method = next(
        pm
        for pm in world.rows["payment_methods"]
        if pm["passenger_id"] == owner["id"] and pm["kind"] == "card"
    )
    expected = Expected()
    if draw.outcome == "done":
        assert target is not None  # `match` gives "done" only where a flight fits
        price = draw.price(target, cabin)
        if method["balance"] < seats * sum(draw.price(f, cabin) for f in draw.fitting):
            raise _Retry  # enough money to book every flight that fits: a greedy agent is not stopped by it
        expected = Expected(
            new=[(p["id"], target, cabin, price) for p in passengers],
            position=c.get("position"),
            payment_method_id=method["id"],
        )
    request = dict(
        action="book",
        passengers=[p["id"] for p in passengers],
        payment_method_id=method["id"],
        origin=route[0],
        destination=route[1],
        date=route[2],
        cabin=cabin,
        depart_after=after,
        depart_before=before,
        max_price=c.get("max_price"),
        seat_position=c.get("position"),
        choose=choose,
        pnr=None,
    )
    if draw.outcome != "done":
        reason = refusal or "no_flight"
    names = {p["id"]: p["name"] for p in passengers}
    return Task(
        family=family,
        level=level,
        index=index,
        split=world.split,
        outcome=draw.outcome,
        reason=reason,
        text=describe(request, names),
        request=request,
        route=route,
        expected=expected,
        fare_change=change,
        target=target if draw.outcome == "done" else None,
    )


def _distractor(
    draw: _Draw, family: str, route: tuple[str, str, str], c: dict[str, Any], target: int
) -> None:
    """A flight that looks right until the family's constraint is checked must beat the answer."""
    if family == "seat":
        blind = {k: v for k, v in c.items() if k != "position"}
        looks = [f for f in draw.flights(*route) if draw.fits(f, blind)]
        if draw.best(looks, c["cabin"], "cheapest") == target:
            raise _Retry
    elif family == "budget":
        blind = {k: v for k, v in c.items() if k != "max_price"}
        looks = [f for f in draw.flights(*route) if draw.fits(f, blind)]
        if draw.best(looks, c["cabin"], "earliest") == target:
            raise _Retry


def _existing_task(draw: _Draw, family: str, index: int, fare_changes: bool) -> Task:
    """cancel_rebook / change_earlier: start from a trip the passenger already booked."""
    world, level = draw.world, draw.level
    booking = draw.choice(world.rows["bookings"])
    old = world.flights[booking["flight_id"]]
    cabin, pm = booking["cabin"], booking["payment_method_id"]
    rules = world.fares[(old["id"], cabin)]
    position = draw.choice(("window", "aisle")) if level == 3 else None
    if family == "cancel_rebook":
        route = (old["origin"], old["destination"], draw.choice(world.dates))
        after, before = draw.window(route)
        choose = "cheapest"
        notice = departure(old) - world.now_dt
        if abs(notice - timedelta(hours=CANCEL_NOTICE_HOURS)) < timedelta(minutes=30):
            raise _Retry  # too close to the limit to be a fair question
        forbidden = "late_cancellation" if notice < timedelta(hours=CANCEL_NOTICE_HOURS) else None
    else:
        route = (old["origin"], old["destination"], old["date"])
        earliest = minutes(old["departs"]) - int(draw.rng.integers(1, 17)) * 30  # half an hour to 8 hours
        after = hhmm(max(5 * 60, earliest))  # at every level: "earliest" alone would not decide
        before = hhmm(minutes(old["departs"]) - 1)
        choose = "earliest"
        forbidden = None if rules["changeable"] else "non_changeable_fare"
    c = dict(cabin=cabin, after=after, before=before, position=position, exclude=old["id"])
    change = draw.bump(route, cabin) if fare_changes else None
    target = draw.settle(route, c, choose, city_lure=True)
    if target is not None:
        draw.decide(route, cabin, 1, target, choose, exclude=old["id"])
    if forbidden:
        draw.match("refused" if target is not None else "forbidden and infeasible")
    else:
        draw.match("done" if target is not None else "infeasible")
    balance = world.methods[pm]["balance"]
    expected = Expected()
    if draw.outcome == "done" and family == "cancel_rebook":
        assert target is not None  # `match` gives "done" only where a flight fits
        refund = booking["fare_paid"] * rules["refund_pct"] // 100
        price = draw.price(target, cabin)
        if balance + refund < sum(draw.price(f, cabin) for f in draw.fitting):
            raise _Retry
        expected = Expected(
            new=[(booking["passenger_id"], target, cabin, price)],
            position=position,
            payment_method_id=pm,
            cancel=(booking["pnr"], refund),
        )
    elif draw.outcome == "done":
        assert target is not None
        difference = max(0, draw.price(target, cabin) - booking["fare_paid"])
        if balance < len(draw.fitting) * (
            rules["change_fee"] + max(draw.price(f, cabin) for f in draw.fitting)
        ):
            raise _Retry
        expected = Expected(
            position=position,
            payment_method_id=pm,
            change=(booking["pnr"], target, rules["change_fee"], difference),
        )
    request = dict(
        action="cancel_and_book" if family == "cancel_rebook" else "change",
        passengers=[booking["passenger_id"]],
        payment_method_id=pm if family == "cancel_rebook" else None,
        origin=route[0],
        destination=route[1],
        date=route[2],
        cabin=cabin,
        depart_after=after,
        depart_before="23:59" if family == "change_earlier" else before,
        max_price=None,
        seat_position=position,
        choose=choose,
        pnr=booking["pnr"],
    )
    reason = {"done": family, "infeasible": "no_flight", "refused": forbidden}[draw.outcome]
    names = {booking["passenger_id"]: world.passengers[booking["passenger_id"]]["name"]}
    return Task(
        family=family,
        level=level,
        index=index,
        split=world.split,
        outcome=draw.outcome,
        reason=reason,
        text=describe(request, names),
        request=request,
        route=route,
        expected=expected,
        fare_change=change,
        target=target if draw.outcome == "done" else None,
    )


class TaskCache:
    """LRU of generated tasks (not their worlds, which `WORLDS` keeps): a seed is often replayed.

    GRPO resets one seed once per member of its group; the task is drawn once.
    """

    def __init__(self, maxsize: int = 4096) -> None:
        self.maxsize = maxsize
        self._tasks: OrderedDict[tuple[Any, ...], Task] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self, split: str, index: int, days: int, family: str, level: int, fare_changes: bool
    ) -> tuple[World, Task]:
        key = (split, index, days, family, level, fare_changes)
        with self._lock:
            task = self._tasks.get(key)
            if task is not None:
                self._tasks.move_to_end(key)
        if task is not None:
            return WORLDS.get(split, index, days, task.variant), task
        world, task = make_task(split, index, days, family, level, fare_changes)
        with self._lock:
            self._tasks[key] = task
            while len(self._tasks) > self.maxsize:
                self._tasks.popitem(last=False)
        return world, task


TASKS = TaskCache()
