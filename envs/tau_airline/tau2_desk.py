"""The airline tools as τ²-bench's airline domain has them, over the same episode database.

τ²-bench keeps τ-bench's tools and fixes some of their quirks; what differs, and is reproduced
here: a booking takes its seats off the flights; changing flights also sets the reservation's
cabin; a fourth booking or certificate is refused ("Too many reservations", "Too many
certificates") instead of overwriting; payment amounts are whole numbers (its `Payment.amount` is
an int: 250.0 is stored as 250, 250.5 is refused) and gift card and certificate balances are
floats; errors name what is missing ("User x not found", "Reservation x not found"); results are
its models' JSON (a user carries its `user_id`, a reservation its `status`, null until cancelled;
searches list `DirectFlight`s); `list_all_airports` answers a list of {"iata", "city"};
`get_flight_status` is a tool and `think` is not. Same fixed ids and clock as τ-bench.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select

from agentrl.core import ToolError
from agentrl.tau_airline import desk as d
from agentrl.tau_airline import models as m
from agentrl.tau_airline.database import CABINS, reservation_json, user_json

TAU2_MESSAGES = {
    **d.MESSAGES,
    "user_missing": "Error: User {user_id} not found",
    "owner_missing": "Error: User {user_id} not found",
    "reservation_missing": "Error: Reservation {reservation_id} not found",
    "details_missing": "Error: Reservation {reservation_id} not found",
    "flight_missing": "Error: Flight {number} not found",
    "flight_date_missing": "Error: Flight {number} not found on date {date}",
    "flight_unavailable": "Error: Flight {number} not available on date {date}",
    "no_seats": "Error: Not enough seats on flight {number}",
    "method_missing": "Error: Payment method {payment_id} not found",
    "balance_short": "Error: Not enough balance in payment method {payment_id}",
    "total_mismatch": "Error: Payment amount does not add up, total price is {total}, but paid {paid}",
    "update_method_missing": "Error: Payment method not found",
    "certificate_update": "Error: Certificate cannot be used to update reservation",
    "gift_short": "Error: Gift card balance is not enough",
    "passenger_count": "Error: Number of passengers does not match",
    "invalid_expression": "Error: Invalid characters in expression",
}
# τ²-bench's tool set: τ-bench's, without `think`, with `get_flight_status`
TOOLS = (
    "book_reservation", "calculate", "cancel_reservation", "get_reservation_details", "get_user_details",
    "list_all_airports", "search_direct_flight", "search_onestop_flight", "send_certificate",
    "transfer_to_human_agents", "update_reservation_baggages", "update_reservation_flights",
    "update_reservation_passengers", "get_flight_status",
)


def whole(amount: Any) -> int:
    """A payment amount as τ²-bench's `Payment.amount: int` takes it (pydantic's lax int)."""
    if isinstance(amount, float):
        if not amount.is_integer():
            raise ToolError("Error: 1 validation error for Payment\namount\n  Input should be a valid "
                            "integer, got a number with a fractional part [type=int_from_float, "
                            f"input_value={amount}, input_type=float]")
        return int(amount)
    return amount


def tau2_user_json(session: Any, user: m.User) -> dict[str, Any]:
    """A user as τ²-bench's `User` model dumps it: its id first, payment methods as
    {source, id, brand, last_four} or {source, id, amount}."""
    doc = user_json(session, user)
    methods = {}
    for payment_id, method in doc["payment_methods"].items():
        ordered = {"source": method["source"], "id": method["id"]}
        ordered.update((k, v) for k, v in method.items() if k not in ordered)
        methods[payment_id] = ordered
    return {"user_id": user.user_id, **doc, "payment_methods": methods}


def tau2_reservation_json(session: Any, reservation: m.Reservation) -> dict[str, Any]:
    """A reservation as τ²-bench's `Reservation` model dumps it: flights as {flight_number, origin,
    destination, date, price}, and `status` always there (null until cancelled)."""
    doc = reservation_json(session, reservation)
    doc["flights"] = [{"flight_number": f["flight_number"], "origin": f["origin"],
                       "destination": f["destination"], "date": f["date"], "price": f["price"]}
                      for f in doc["flights"]]
    doc["status"] = reservation.status
    return doc


class Tau2Desk(d.Desk):
    """τ²-bench's airline tools (see the module's docstring for what differs from τ-bench's)."""

    messages = TAU2_MESSAGES
    takes_seats = True
    updates_cabin = True

    def _booking_id(self) -> str:
        taken = set(self.session.scalars(select(m.Reservation.reservation_id)
                                         .where(m.Reservation.reservation_id.in_(d.BOOKING_IDS))))
        for reservation_id in d.BOOKING_IDS:
            if reservation_id not in taken:
                return reservation_id
        raise ToolError("Error: Too many reservations")

    def _payment_amount(self, amount: Any) -> Any:
        return whole(amount)

    def _user_text(self, user: m.User) -> str:
        return json.dumps(tau2_user_json(self.session, user))

    def _reservation_text(self, reservation: m.Reservation) -> str:
        self.session.flush()
        return json.dumps(tau2_reservation_json(self.session, reservation))

    def list_all_airports(self) -> str:
        return json.dumps([{"iata": code, "city": city} for code, city in d.AIRPORTS.items()])

    def _direct(self, day: str, origin: str | None, destination: str | None,
                leave_after: str | None = None) -> list[dict[str, Any]]:
        """τ²-bench's `_search_direct_flight`: flights in database order, available on `day`."""
        query = select(m.Flight).order_by(m.Flight.position)
        if origin is not None:
            query = query.where(m.Flight.origin == origin)
        if destination is not None:
            query = query.where(m.Flight.destination == destination)
        results = []
        for flight in self.session.scalars(query):
            state = self.session.get(m.FlightDate, (flight.flight_number, day))
            if state is None or state.status != "available":
                continue
            if leave_after is not None and flight.scheduled_departure_time_est < leave_after:
                continue
            results.append({
                "flight_number": flight.flight_number, "origin": flight.origin,
                "destination": flight.destination, "status": "available",
                "scheduled_departure_time_est": flight.scheduled_departure_time_est,
                "scheduled_arrival_time_est": flight.scheduled_arrival_time_est, "date": None,
                "available_seats": {c: getattr(state, f"seats_{c}") for c in CABINS},
                "prices": {c: getattr(state, f"price_{c}") for c in CABINS},
            })
        return results

    def search_direct_flight(self, a: d.SearchArgs) -> str:
        return json.dumps(self._direct(a.date, a.origin, a.destination))

    def search_onestop_flight(self, a: d.SearchArgs) -> str:
        """Each flight out of `origin` on the date, then each flight on to `destination` leaving no
        earlier than the first arrives (times compared as text, as τ²-bench does), on the next
        May day when the first lands after midnight ("+1")."""
        results = []
        for first in self._direct(a.date, a.origin, None):
            first["date"] = a.date
            second_day = d.second_leg_day(first["scheduled_arrival_time_est"], a.date)
            for second in self._direct(second_day, first["destination"], a.destination,
                                       first["scheduled_arrival_time_est"]):
                second["date"] = second_day
                results.append([first, second])
        return json.dumps(results)

    def send_certificate(self, a: d.CertificateArgs) -> str:
        if self._user(a.user_id) is None:
            raise self._error("user_missing", user_id=a.user_id)
        methods = self._methods(a.user_id)
        for payment_id in d.CERTIFICATE_IDS:
            if payment_id not in methods:
                position = self._next_position(m.PaymentMethod, m.PaymentMethod.user_id, a.user_id)
                self.session.add(m.PaymentMethod(user_id=a.user_id, payment_id=payment_id, position=position,
                                                 source="certificate", amount=float(a.amount)))
                self.touched.add(("users", a.user_id))
                return f"Certificate {payment_id} added to user {a.user_id} with amount {a.amount}."
        raise ToolError("Error: Too many certificates")

    def get_flight_status(self, a: d.FlightRef) -> str:
        if self.session.get(m.Flight, a.flight_number) is None:
            raise self._error("flight_missing", number=a.flight_number)
        state = self.session.get(m.FlightDate, (a.flight_number, a.date))
        if state is None:
            raise self._error("flight_date_missing", number=a.flight_number, date=a.date)
        return state.status

