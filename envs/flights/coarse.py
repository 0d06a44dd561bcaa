"""Flights-v0 at the coarse level: lookups plus macros that search and act in one call.

`book_best`, `rebook` and `change_to_best` search the exact route, pick the best flight that
meets the request's constraints and act. A macro is all or nothing: it checks everything
(route, constraints, seats, card owner, balance, fare) before it writes, then runs the default
tools' own code, so it enforces exactly what they enforce; the policy rules the default tools
leave to the agent (group size, notice, changeable fare) stay the agent's.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from agentrl.core import ToolError, tool
from agentrl.flights.composite import Composite, offers
from agentrl.flights.schemas import TIME, BookArgs, BookingArgs, Cabin, ChangeArgs, Position, SearchArgs


class _Constraints(BaseModel):
    cabin: Cabin = "economy"
    choose: Literal["cheapest", "earliest"] = Field(
        "cheapest", description="cheapest (ties: earlier departure) or earliest departure."
    )
    depart_after: str = Field("00:00", pattern=TIME, description="Earliest departure, HH:MM (inclusive).")
    depart_before: str = Field("23:59", pattern=TIME, description="Latest departure, HH:MM (inclusive).")
    max_price: int | None = Field(None, ge=0, description="Highest fare per person in CNY.")
    seat_preference: Position | None = Field(None, description="Every passenger gets a seat of this type.")


class BookBestArgs(_Constraints, SearchArgs):
    passenger_ids: list[str] = Field(min_length=1, max_length=6, description="One seat per passenger.")
    payment_method_id: str


class RebookArgs(_Constraints, SearchArgs):
    pnr: str = Field(min_length=1, max_length=12, description="The booking to cancel.")
    payment_method_id: str


class ChangeBestArgs(BaseModel):
    pnr: str = Field(min_length=1, max_length=12)
    choose: Literal["cheapest", "earliest"] = "earliest"
    depart_after: str = Field("00:00", pattern=TIME, description="Earliest departure, HH:MM (inclusive).")
    depart_before: str = Field("23:59", pattern=TIME, description="Latest departure, HH:MM (inclusive).")
    max_price: int | None = Field(None, ge=0)
    seat_preference: Position | None = None


@offers(
    "search_flights",
    "get_flight",
    "check_seats",
    "get_passenger",
    "get_booking",
    "book_best",
    "rebook",
    "change_to_best",
    "finish",
)
class CoarseFlightsEnv(Composite):
    """Macro tools: each searches the exact route, picks the best fitting flight and acts."""

    granularity = "coarse"

    def _best(
        self,
        route: tuple[str, str, str],
        c: _Constraints | ChangeBestArgs,
        cabin: str,
        seats: int,
        exclude: int | None = None,
    ) -> dict[str, Any]:
        """The best flight of exactly this route that fits, from the current fares and seats."""
        if route == self.task.route:
            self._mark("searched_route")
        fitting = []
        for row in self._summaries(self.world.route_flights(*route)):
            fare = row["fares"][cabin]
            if row["flight_id"] == exclude or not c.depart_after <= row["departs"] <= c.depart_before:
                continue
            if (c.max_price is not None and fare["price"] > c.max_price) or fare["seats_left"] < seats:
                continue
            if (
                c.seat_preference
                and len(self._free_seats(row["flight_id"], cabin)[c.seat_preference]) < seats
            ):
                continue
            fitting.append(row)
        if not fitting:
            raise ToolError(
                f"no {cabin} flight from {route[0]} to {route[1]} on {route[2]} meets the "
                "constraints; nothing was changed"
            )
        if c.choose == "earliest":
            return min(fitting, key=lambda r: r["departs"])
        return min(fitting, key=lambda r: (r["fares"][cabin]["price"], r["departs"]))

    def _book(
        self, flight: dict[str, Any], args: BookBestArgs | RebookArgs, passengers: list[str]
    ) -> dict[str, Any]:
        """`book_flight` on the chosen flight, under the macro's cabin, card and seat preference."""
        return self.book_flight(
            BookArgs(
                flight_id=flight["flight_id"],
                cabin=args.cabin,
                passenger_ids=passengers,
                payment_method_id=args.payment_method_id,
                seat_preference=args.seat_preference,
            )
        )

    @tool(
        "Search the exact route (these two airports only) and book the best flight that meets the "
        "constraints for all passengers, paid by one of their payment methods, in one call. Nothing is "
        "booked if no flight fits."
    )
    def book_best(self, args: BookBestArgs) -> dict[str, Any]:
        with self._one_call():
            self._check_passengers(args.passenger_ids)
            self._check_payer(args.payment_method_id, args.passenger_ids)
            self._maybe_change_fare()
            route = (args.origin, args.destination, args.date)
            best = self._best(route, args, args.cabin, len(args.passenger_ids))
            return self._book(best, args, args.passenger_ids)

    @tool(
        "Cancel a booking and book its passenger on the best flight of the exact route that meets the "
        "constraints, paid by the given payment method, in one call. If no flight fits, nothing is "
        "cancelled or booked."
    )
    def rebook(self, args: RebookArgs) -> dict[str, Any]:
        with self._one_call():
            booking = self._confirmed_booking(args.pnr, "is already")
            passengers = [booking.passenger_id]
            self._check_payer(args.payment_method_id, passengers)
            self._maybe_change_fare()
            route = (args.origin, args.destination, args.date)
            best = self._best(route, args, args.cabin, 1, exclude=booking.flight_id)
            refund = booking.fare_paid * self._fare(booking.flight_id, booking.cabin).refund_pct // 100
            back = refund if booking.payment_method_id == args.payment_method_id else 0
            self._payment_method(args.payment_method_id, best["fares"][args.cabin]["price"] - back)
            cancelled = self.cancel_booking(BookingArgs(pnr=booking.pnr))
            booked = self._book(best, args, passengers)
            return {"cancelled": cancelled, "booked": booked}

    @tool(
        "Move a booking to the best other flight of its route and day, same cabin, that meets the "
        "constraints, in one call; charged like change_booking. Nothing changes if no flight fits."
    )
    def change_to_best(self, args: ChangeBestArgs) -> dict[str, Any]:
        with self._one_call():
            booking = self._confirmed_booking(args.pnr)
            old = self.world.flights[booking.flight_id]
            self._maybe_change_fare()
            route = (old["origin"], old["destination"], old["date"])
            best = self._best(route, args, booking.cabin, 1, exclude=booking.flight_id)
            cost = self._change_cost(booking, best["flight_id"])
            self._payment_method(booking.payment_method_id, cost.fee + cost.difference)
            return self.change_booking(
                ChangeArgs(
                    pnr=booking.pnr, new_flight_id=best["flight_id"], seat_preference=args.seat_preference
                )
            )
