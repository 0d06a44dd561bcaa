"""One attempt at drawing a task of a world: parameter draws and the rejection search for an answer.

A draw is rejected (`Retry`) unless the answer has real rivals and the constraints decide (see
`tasks.py` for what a task promises). Ruling out the first place of a blind order moves the answer
to the next place unless the route has many flights and the answer's place is spread over them.
Requests are about a world's trunks (about 35 flights a day each way, see `generation.py`), windows
are narrow (4, 3, 2 hours at levels 1, 2, 3), and each task draws a place before its parameters: the
answer must stand at that place or later in the blind order of its own objective (by price for
"cheapest", by departure for "earliest"), the place uniform over the first `SPREAD` of the route's
bookable flights. A window holds the cheap flights of its hours, so the cheapest in it is mostly
among the route's first few by price; the drawn place lifts it up the order without pointing
anywhere (a floor, not a target: far fewer draws are rejected, and no place holds the answer more
often than 1 / the number of places). The other blind orders (by departure for "cheapest", by price
for "earliest", the search's listing) are spread by the windows' positions and by the price draws.
Each place k of each order then holds the answer of a few tasks in a hundred
(`tests/flights/test_flights_hacks.py` plays the 2nd-5th cheapest and earliest, 1st-3rd latest and
dearest).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agentrl.flights.world import CABINS, World, hhmm, minutes

SPREAD = 0.6  # the share of a route's bookable flights whose places the answer's floor is drawn from
WINDOW_HOURS = (4, 3, 2)  # width of the departure window per level


class Retry(Exception):
    """This draw does not give the planned outcome with real rivals; draw again."""


class Draw:
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
            raise Retry
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
            raise Retry  # a tie: "the cheapest" would not name one flight
        return min(flights, key=lambda f: self.price(f, cabin))

    def settle(
        self, route: tuple[str, str, str], c: dict[str, Any], choose: str, city_lure: bool
    ) -> int | None:
        """The answer on the exact route, or None if there is none; `Retry` unless rivals exist."""
        exact = [f for f in self.flights(*route) if self.fits(f, c)]
        self.fitting = exact
        if len(exact) == 1:
            raise Retry  # the answer must not be the only flight that fits
        lures = [f for f in self.world.other_flights(*route) if self.fits(f, c)] if city_lure else []
        if not exact:
            if city_lure and not lures:
                raise Retry  # an infeasible request must tempt a city-level reading
            return None
        target = self.best(exact, c["cabin"], choose)
        if city_lure and self.best(exact + lures, c["cabin"], choose) == target:
            raise Retry  # a city-level reading must pick another flight
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
        """`Retry` unless the constraints decide: the route's cheapest, earliest and latest flight
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
            raise Retry
        if choose == "earliest":
            order = sorted(bookable, key=lambda f: flights[f]["departs"])
        else:
            order = sorted(bookable, key=lambda f: (self.price(f, cabin), flights[f]["departs"]))
        places = max(1, int(SPREAD * len(order)) - 1)  # floors 2, 3, ... (place 1 is ruled out above)
        if order.index(target) < 1 + int(self.place * places):
            raise Retry

    def match(self, natural: str) -> None:
        if natural != self.outcome:
            raise Retry

    def answer(
        self, route: tuple[str, str, str], c: dict[str, Any], choose: str, fare_changes: bool
    ) -> tuple[tuple[int, str, int] | None, int | None]:
        """(the fare rise, the answer) of a request on `route` with the constraints `c`: the rise first
        (in the moving world), then the answer settled on the risen fares (None: no flight fits),
        with real rivals, and decided by the constraints."""
        change = self.bump(route, c["cabin"]) if fare_changes else None
        target = self.settle(route, c, choose, city_lure=True)
        if target is not None:
            self.decide(route, c["cabin"], c.get("seats", 1), target, choose, exclude=c.get("exclude"))
        return change, target
