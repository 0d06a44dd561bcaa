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

Each task draws a place before its parameters, a floor for the answer in the blind order of its
own objective, so that no place of an order blind to the constraints holds the answer often: the
draws and the rejection search are `draws.py`'s. A task's family draws its request (a purchase,
`_book_task`; or a change to a trip already booked, `_existing_task`); both end alike (`_task`).

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
from typing import Any, NamedTuple

import numpy as np

from agentrl.flights.draws import Draw, Retry
from agentrl.flights.geography import SPLIT_NAMES
from agentrl.flights.task_ids import keyed_id
from agentrl.flights.templates import WORLDS
from agentrl.flights.text import CANCEL_NOTICE_HOURS, MAX_PASSENGERS, describe
from agentrl.flights.world import World, departure, hhmm, minutes

FAMILIES = ("cheapest", "seat", "budget", "multi_pax", "cancel_rebook", "change_earlier")
LEVELS = (1, 2, 3)
SPLITS = SPLIT_NAMES
# per block of OUTCOME_BLOCK consecutive seeds of a family: this many infeasible, this many refused
OUTCOME_BLOCK, N_INFEASIBLE, N_REFUSED = 40, 5, 4
ATTEMPTS, MAX_VARIANTS = 400, 64  # a high drawn floor at the widest window can take a few dozen worlds
STRICT_SHARE = 0.75  # of seat and budget tasks whose pick blind to their own constraint must be wrong


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
            task = generator(Draw(world, rng, level, outcome, strict, place), family, index, fare_changes)
        except Retry:
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


def _book_task(draw: Draw, family: str, index: int, fare_changes: bool) -> Task:
    """cheapest / seat / budget / multi_pax: one new purchase on an exact route, for 1-5 people."""
    world, level = draw.world, draw.level
    route = draw.route()
    cabin, (after, before) = draw.cabin(), draw.window(route)
    c: dict[str, Any] = dict(cabin=cabin, after=after, before=before)
    choose = "cheapest"
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
            raise Retry
        c["max_price"] = int(
            round(prices[0] + (prices[-1] - prices[0]) * (0.15 + 0.7 * draw.rng.random()), -1)
        )
    elif family == "multi_pax":
        c["seats"] = (2, draw.choice((2, 3)), 3)[level - 1]
        if refusal == "group_size":
            c["seats"] = MAX_PASSENGERS + draw.choice((1, 2))
    change, target = draw.answer(route, c, choose, fare_changes)
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
            raise Retry  # enough money to book every flight that fits: a greedy agent is not stopped by it
        expected = Expected(
            new=[(p["id"], target, cabin, price) for p in passengers],
            position=c.get("position"),
            payment_method_id=method["id"],
        )
    asked = _Asked("book", {p["id"]: p["name"] for p in passengers}, method["id"], choose, None, before)
    return _task(draw, family, index, route, c, asked, expected, change, target, refusal)


def _distractor(
    draw: Draw, family: str, route: tuple[str, str, str], c: dict[str, Any], target: int
) -> None:
    """A flight that looks right until the family's constraint is checked must beat the answer."""
    if family == "seat":
        blind = {k: v for k, v in c.items() if k != "position"}
        looks = [f for f in draw.flights(*route) if draw.fits(f, blind)]
        if draw.best(looks, c["cabin"], "cheapest") == target:
            raise Retry
    elif family == "budget":
        blind = {k: v for k, v in c.items() if k != "max_price"}
        looks = [f for f in draw.flights(*route) if draw.fits(f, blind)]
        if draw.best(looks, c["cabin"], "earliest") == target:
            raise Retry


def _existing_task(draw: Draw, family: str, index: int, fare_changes: bool) -> Task:
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
            raise Retry  # too close to the limit to be a fair question
        forbidden = "late_cancellation" if notice < timedelta(hours=CANCEL_NOTICE_HOURS) else None
    else:
        route = (old["origin"], old["destination"], old["date"])
        earliest = minutes(old["departs"]) - int(draw.rng.integers(1, 17)) * 30  # half an hour to 8 hours
        after = hhmm(max(5 * 60, earliest))  # at every level: "earliest" alone would not decide
        before = hhmm(minutes(old["departs"]) - 1)
        choose = "earliest"
        forbidden = None if rules["changeable"] else "non_changeable_fare"
    c = dict(cabin=cabin, after=after, before=before, position=position, exclude=old["id"])
    change, target = draw.answer(route, c, choose, fare_changes)
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
            raise Retry
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
            raise Retry
        expected = Expected(
            position=position,
            payment_method_id=pm,
            change=(booking["pnr"], target, rules["change_fee"], difference),
        )
    rebook = family == "cancel_rebook"
    names = {booking["passenger_id"]: world.passengers[booking["passenger_id"]]["name"]}
    asked = _Asked(
        "cancel_and_book" if rebook else "change", names, pm if rebook else None, choose, booking["pnr"],
        before if rebook else "23:59",  # a change asks for any earlier flight: the window is the agent's
    )
    return _task(draw, family, index, route, c, asked, expected, change, target, forbidden)


class _Asked(NamedTuple):
    """What a request names beyond its route and constraints (`_task` writes the whole request)."""

    action: str  # book | cancel_and_book | change
    passengers: dict[str, str]  # id -> name, in the request's order
    payment_method_id: str | None
    choose: str  # cheapest | earliest
    pnr: str | None
    depart_before: str  # the window's end as told: the constraint's, or open ("23:59")


def _task(
    draw: Draw,
    family: str,
    index: int,
    route: tuple[str, str, str],
    c: dict[str, Any],
    asked: _Asked,
    expected: Expected,
    fare_change: tuple[int, str, int] | None,
    target: int | None,
    refusal: str | None,
) -> Task:
    """The end both kinds of task share: the request, its fields in one order for every family (what
    `describe` words and `privileged` shows), and the task, whose reason is the family where the
    outcome is done, the refusal's rule where refused, and the missing flight where infeasible."""
    request = dict(
        action=asked.action,
        passengers=list(asked.passengers),
        payment_method_id=asked.payment_method_id,
        origin=route[0],
        destination=route[1],
        date=route[2],
        cabin=c["cabin"],
        depart_after=c["after"],
        depart_before=asked.depart_before,
        max_price=c.get("max_price"),
        seat_position=c.get("position"),
        choose=asked.choose,
        pnr=asked.pnr,
    )
    reason = {"done": family, "infeasible": "no_flight", "refused": refusal}[draw.outcome]
    assert reason is not None, "a refused task names the rule that refuses it"
    return Task(
        family=family,
        level=draw.level,
        index=index,
        split=draw.world.split,
        outcome=draw.outcome,
        reason=reason,
        text=describe(request, asked.passengers),
        request=request,
        route=route,
        expected=expected,
        fare_change=fare_change,
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
