"""The default level's tools of Flights-v0, and the moving world every tool call meets first.

A mixin of `FlightsEnv`, which owns the episode (its reset, customer, rewards and records): the
tools are the desk's spec, side by side here, over `WorldQueries`' reads and writes of the episode's
database. Before each tool the service may be busy or other customers buy seats (`_service`), and
the first write may meet a fare rise (`_maybe_change_fare`); the coarse and fine levels build their
tools from these (`composite.py`).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
from sqlalchemy import Row

from agentrl.core import ToolError, tool
from agentrl.flights.customer import Customer, identifying
from agentrl.flights.geography import AIRPORT_CITY, CITY_AIRPORTS
from agentrl.flights.queries import (
    ADD_BOOKING,
    CANCEL,
    FLIGHT_FARES,
    METHOD,
    MOVE,
    PASSENGER_PNRS,
    PAYMENT_METHODS,
    SET_PRICE,
    ChangeCost,
    WorldQueries,
)
from agentrl.flights.schemas import (
    BookArgs,
    BookingArgs,
    ChangeArgs,
    FilterArgs,
    FinishArgs,
    FlightArgs,
    PassengerArgs,
    SearchArgs,
    SeatsArgs,
)
from agentrl.flights.tasks import Task
from agentrl.flights.world import CABINS, POSITIONS, SEAT_INFO, new_pnr

BUSY = "service busy, please retry the same call"


class DeskTools(WorldQueries):
    """The tools of the default level and the moving world they run in (a mixin of `FlightsEnv`)."""

    # the episode's state, set by `FlightsEnv` at every reset
    task: Task
    customer: Customer | None
    churn: bool
    busy_rate: float
    _rng: np.random.Generator  # the moving world's own stream
    _last_search: list[int]  # what `filter_flights` filters
    _pnrs: set[str]  # every booking code in use: a new one is drawn until it is not
    _was_busy: bool
    _fare_changed: bool
    _outcome: str | None  # what `finish` declared
    _progress: dict[str, bool]  # the subgoals reached (`GOALS` of `env.py`)

    def _mark(self, goal: str) -> None:
        # with a customer, only once it has told what the subgoal would confirm (see `customer.py`)
        if self.customer is None or self.customer.told(identifying(self.task.request, goal)):
            self._progress[goal] = True

    # --- the moving world --------------------------------------------------------------------
    def _service(self) -> None:
        """Run before every tool: maybe refuse as busy, maybe let other customers buy seats."""
        if self.busy_rate and not self._was_busy and self._rng.random() < self.busy_rate:
            self._was_busy = True
            raise ToolError(BUSY)
        self._was_busy = False
        if self.churn and self._rng.random() < 0.5:
            self._churn()

    def _churn(self) -> None:
        """Sell a seat on a flight the request's search lists (drawn uniformly: the answer and its
        rivals alike), never the last of a cabin or seat type.

        Keeping those classes non-empty keeps every task's answer stable while the seat maps move.
        """
        flights = self.world.city_flights(*self.task.route)
        if not flights:
            return
        flight_id = flights[int(self._rng.integers(len(flights)))]
        cabin = CABINS[int(self._rng.integers(len(CABINS)))]
        free = self._free_seats(flight_id, cabin)
        if sum(len(v) for v in free.values()) <= 6:
            return
        position = POSITIONS[int(self._rng.integers(len(POSITIONS)))]
        if len(free[position]) <= 1:
            return
        seat_no = free[position][int(self._rng.integers(len(free[position])))]
        self._occupy(flight_id, seat_no, cabin, "churn", None)
        self.session.commit()

    def _maybe_change_fare(self) -> None:
        """The first write meets the task's fare rise (on a flight drawn independently of the answer)
        and fails, whatever flight it names; a new search shows the risen fare."""
        if self.task.fare_change and not self._fare_changed:
            flight_id, cabin, price = self.task.fare_change
            self._fare_changed = True
            self._conn.execute(SET_PRICE, {"at_flight": flight_id, "at_cabin": cabin, "new_price": price})
            self.session.commit()
            raise ToolError(
                "fares on this route changed since your search; nothing was booked or changed. "
                "Search again for current prices."
            )

    def _change_terms(self, pnr: str, new_flight_id: int) -> tuple[Row[Any], SimpleNamespace, ChangeCost]:
        """A change's checks (booking confirmed, another flight of its route), then the fare may
        move, then its cost: (booking, new flight, cost). `change_booking` and the fine level's
        `quote_change` both go through here, so a quote refuses exactly what the change would."""
        booking = self._confirmed_booking(pnr)
        old, new = self._flight(booking.flight_id), self._flight(new_flight_id)
        if (old.origin, old.destination) != (new.origin, new.destination) or old.id == new.id:
            raise ToolError(f"a booking can only move to another {old.origin}->{old.destination} flight")
        self._maybe_change_fare()
        return booking, new, self._change_cost(booking, new.id)

    # --- tools ---------------------------------------------------------------------------------
    @tool(
        "Search flights by origin, destination and date. Results include nearby airports of the same "
        "cities and are not sorted."
    )
    def search_flights(self, args: SearchArgs) -> dict[str, Any]:
        self._service()
        origins = CITY_AIRPORTS.get(AIRPORT_CITY.get(args.origin, ""), [])
        destinations = CITY_AIRPORTS.get(AIRPORT_CITY.get(args.destination, ""), [])
        if not origins or not destinations:
            raise ToolError(f"unknown airport code; known: {', '.join(sorted(AIRPORT_CITY))}")
        found = [
            fid for o in origins for d in destinations for fid in self.world.route_flights(o, d, args.date)
        ]
        found.sort(key=lambda fid: self.world.flights[fid]["number"])
        self._last_search = found
        if (args.origin, args.destination, args.date) == self.task.route:
            self._mark("searched_route")
        return {"count": len(found), "results": self._summaries(found)}

    @tool("Filter and sort the results of the last search_flights call.")
    def filter_flights(self, args: FilterArgs) -> dict[str, Any]:
        self._service()
        if not self._last_search:
            raise ToolError("nothing to filter: call search_flights first")
        rows = self._summaries(self._last_search)
        cabin = args.cabin or "economy"
        rows = [
            r
            for r in rows
            if args.depart_after <= r["departs"] <= args.depart_before
            and (args.origin is None or r["origin"] == args.origin)
            and (args.destination is None or r["destination"] == args.destination)
            and (args.max_price is None or r["fares"][cabin]["price"] <= args.max_price)
            and (args.cabin is None or r["fares"][cabin]["seats_left"] > 0)
        ]
        if args.sort_by == "price":
            rows.sort(key=lambda r: (r["fares"][cabin]["price"], r["departs"]))
        elif args.sort_by == "departure":
            rows.sort(key=lambda r: r["departs"])
        return {"count": len(rows), "results": rows}

    @tool("Details of one flight: schedule, fares, fare rules and seats left per cabin.")
    def get_flight(self, args: FlightArgs) -> dict[str, Any]:
        self._service()
        flight = self._flight(args.flight_id)
        summary = self._summaries([flight.id])[0]
        for fare in self._conn.execute(FLIGHT_FARES, {"flight_id": flight.id}):
            summary["fares"][fare.cabin].update(
                refund_pct=fare.refund_pct, change_fee=fare.change_fee, changeable=fare.changeable
            )
        summary["carrier"] = flight.carrier
        return summary

    @tool("Free seats of a flight's cabin, grouped by window / aisle / middle.")
    def check_seats(self, args: SeatsArgs) -> dict[str, Any]:
        self._service()
        self._flight(args.flight_id)
        free = self._free_seats(args.flight_id, args.cabin)
        if args.position:
            free = {args.position: free[args.position]}
        return {
            "flight_id": args.flight_id,
            "cabin": args.cabin,
            "available": free,
            "counts": {p: len(s) for p, s in free.items()},
        }

    @tool("A passenger's profile: payment methods with balances, and bookings.")
    def get_passenger(self, args: PassengerArgs) -> dict[str, Any]:
        self._service()
        # the profile never changes during an episode (the world's row); balances and bookings do
        passenger = self.world.passengers.get(args.passenger_id)
        if passenger is None:
            raise ToolError(f"no passenger {args.passenger_id!r}")
        pid = passenger["id"]
        methods = self._conn.execute(PAYMENT_METHODS, {"passenger_id": pid}).all()
        pnrs = self._conn.execute(PASSENGER_PNRS, {"passenger_id": pid}).scalars().all()
        if not self.task.request["pnr"] and pid == self.task.request["passengers"][0]:
            self._mark("looked_up_customer")
        return {
            "passenger_id": pid,
            "name": passenger["name"],
            "email": passenger["email"],
            "payment_methods": [{"id": p.id, "kind": p.kind, "balance": p.balance} for p in methods],
            "bookings": pnrs,
        }

    @tool(
        "Book seats on a flight for one or more passengers, paid by one payment method. Give an exact "
        "seat (one passenger only) or a seat preference; otherwise the first free seats are assigned."
    )
    def book_flight(self, args: BookArgs) -> dict[str, Any]:
        self._service()
        flight = self._flight(args.flight_id)
        if args.seat and len(args.passenger_ids) > 1:
            raise ToolError("an exact seat can only be given for one passenger; use seat_preference")
        if len(set(args.passenger_ids)) != len(args.passenger_ids):
            raise ToolError("a passenger is listed twice")
        self._check_passengers(args.passenger_ids)
        self._check_payer(args.payment_method_id, args.passenger_ids)
        self._maybe_change_fare()
        price = self._fare(flight.id, args.cabin).price
        seats = self._pick_seat(
            flight.id, args.cabin, args.seat, args.seat_preference, len(args.passenger_ids)
        )
        pm = self._payment_method(args.payment_method_id, price * len(args.passenger_ids))
        made, rows = [], []
        for pid, seat_no in zip(args.passenger_ids, seats, strict=True):
            pnr = new_pnr(self._rng)
            while pnr in self._pnrs:
                pnr = new_pnr(self._rng)
            self._pnrs.add(pnr)
            position = SEAT_INFO[flight.aircraft][seat_no][4]
            made.append(
                {"pnr": pnr, "passenger_id": pid, "seat": seat_no, "position": position, "fare_paid": price}
            )
            rows.append(
                dict(
                    pnr=pnr,
                    passenger_id=pid,
                    flight_id=flight.id,
                    cabin=args.cabin,
                    seat_no=seat_no,
                    fare_paid=price,
                    payment_method_id=pm.id,
                    status="confirmed",
                )
            )
        # in the order the ORM wrote them: the bookings, their seats, the ledger, the balance
        self._conn.execute(ADD_BOOKING, rows)
        for b in made:
            self._occupy(flight.id, b["seat"], args.cabin, "booking", b["pnr"])
        balance = self._charge(pm, [(b["pnr"], "fare", price) for b in made])
        self.session.commit()
        return {
            "status": "confirmed",
            "flight_id": flight.id,
            "cabin": args.cabin,
            "bookings": made,
            "total_charged": price * len(made),
            "payment_method_id": pm.id,
            "balance_after": balance,
        }

    @tool("Look up a booking by its PNR, with its flight and fare rules.")
    def get_booking(self, args: BookingArgs) -> dict[str, Any]:
        self._service()
        view = self._booking_view(self._booking(args.pnr))
        if view["pnr"] == self.task.request["pnr"]:
            self._mark("looked_up_customer")
        return view

    @tool(
        "Cancel a booking: its seat is released and refund_pct of the fare paid goes back to the payment "
        "method it was paid with."
    )
    def cancel_booking(self, args: BookingArgs) -> dict[str, Any]:
        self._service()
        booking = self._confirmed_booking(args.pnr, "is already")
        refund = booking.fare_paid * self._fare(booking.flight_id, booking.cabin).refund_pct // 100
        pm = self._conn.execute(METHOD, {"pm_id": booking.payment_method_id}).one()
        self._conn.execute(CANCEL, {"at_pnr": booking.pnr})
        self._release(booking.flight_id, booking.seat_no)
        balance = self._charge(pm, [(booking.pnr, "refund", -refund)])
        self.session.commit()
        return {
            "pnr": booking.pnr,
            "status": "cancelled",
            "refund": refund,
            "payment_method_id": pm.id,
            "balance_after": balance,
        }

    @tool(
        "Move a booking to another flight on the same route, same cabin. Charges the change fee plus any "
        "higher fare (a lower fare is not refunded)."
    )
    def change_booking(self, args: ChangeArgs) -> dict[str, Any]:
        self._service()
        booking, new, cost = self._change_terms(args.pnr, args.new_flight_id)
        seat_no = self._pick_seat(new.id, booking.cabin, args.seat, args.seat_preference, 1)[0]
        pm = self._payment_method(booking.payment_method_id, cost.fee + cost.difference)
        self._release(booking.flight_id, booking.seat_no)
        self._conn.execute(
            MOVE,
            {
                "at_pnr": booking.pnr,
                "new_flight": new.id,
                "new_seat": seat_no,
                "new_fare": booking.fare_paid + cost.difference,
            },
        )
        self._occupy(new.id, seat_no, booking.cabin, "booking", booking.pnr)
        charges = [("change_fee", cost.fee), ("fare_difference", cost.difference)]
        balance = self._charge(pm, [(booking.pnr, kind, amount) for kind, amount in charges if amount])
        self.session.commit()
        return {
            "pnr": booking.pnr,
            "status": "confirmed",
            "flight_id": new.id,
            "seat": seat_no,
            "charged": cost.fee + cost.difference,
            "balance_after": balance,
        }

    @tool(
        "End the conversation: declare the outcome (done: the request was carried out; infeasible: no "
        "flight satisfies it, nothing changed; refused: the policy forbids it, nothing changed) and "
        "give the customer a message.",
        ends_episode=True,
    )
    def finish(self, args: FinishArgs) -> str:
        self._outcome = args.outcome
        return "conversation closed"
