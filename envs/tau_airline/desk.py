"""The airline tools over the episode's database, behaving as τ-bench's do.

Same arguments, same results and the same error texts, including the benchmark's quirks, which
its gold actions and its scores depend on: bookings get the ids HATHAT, HATHAU, HATHAV in turn and
are created at the fixed time 2024-05-15T15:00:00; certificates get the ids certificate_3221322,
_3221323, _3221324; seats are never taken off a flight; a missing reservation reads "user not
found"; a one-stop search dates the second leg by adding one to the day of the month. An error is
raised as `ToolError` with the benchmark's text, and changes nothing. The tools' arguments (one
pydantic model per tool) are in `desk_args`, shared with τ²-bench's desk.
"""

from __future__ import annotations

import ast
import json
import operator
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from agentrl.core import ToolError
from agentrl.tau_airline import models as m
from agentrl.tau_airline.database import (
    flight_date_json,
    flight_json,
    reservation_json,
    reservation_parts,
    reservation_row,
    user_json,
)
from agentrl.tau_airline.desk_args import (
    AIRPORT,
    DATE,
    PAYMENT_ID,
    RESERVATION_ID,
    USER_ID,
    BaggageArgs,
    BookReservationArgs,
    Cabin,
    CertificateArgs,
    ExpressionArgs,
    FlightRef,
    Number,
    PassengerArgs,
    PaymentArgs,
    ReservationArgs,
    SearchArgs,
    ThinkArgs,
    TransferArgs,
    UpdateFlightsArgs,
    UpdatePassengersArgs,
    UserArgs,
)

__all__ = [  # the tools' arguments are desk_args's, importable from here as well
    "AIRPORT", "AIRPORTS", "BAG_FEE", "BOOKED_AT", "BOOKING_IDS", "CALCULATOR_CHARACTERS", "CERTIFICATE_IDS",
    "DATE", "INSURANCE_PER_PASSENGER", "MESSAGES", "PAYMENT_ID", "RESERVATION_ID", "USER_ID", "BaggageArgs",
    "BookReservationArgs", "Cabin", "CertificateArgs", "Desk", "ExpressionArgs", "FlightRef", "Number",
    "PassengerArgs", "PaymentArgs", "ReservationArgs", "SearchArgs", "ThinkArgs", "TransferArgs",
    "UpdateFlightsArgs", "UpdatePassengersArgs", "UserArgs", "calculate", "second_leg_day",
]

BOOKING_IDS = ("HATHAT", "HATHAU", "HATHAV")
BOOKED_AT = "2024-05-15T15:00:00"
CERTIFICATE_IDS = ("certificate_3221322", "certificate_3221323", "certificate_3221324")
AIRPORTS = {
    "SFO": "San Francisco", "JFK": "New York", "LAX": "Los Angeles", "ORD": "Chicago", "DFW": "Dallas",
    "DEN": "Denver", "SEA": "Seattle", "ATL": "Atlanta", "MIA": "Miami", "BOS": "Boston",
    "PHX": "Phoenix", "IAH": "Houston", "LAS": "Las Vegas", "MCO": "Orlando", "EWR": "Newark",
    "CLT": "Charlotte", "MSP": "Minneapolis", "DTW": "Detroit", "PHL": "Philadelphia", "LGA": "LaGuardia",
}
INSURANCE_PER_PASSENGER = 30
BAG_FEE = 50


# --- arithmetic -------------------------------------------------------------------------------
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
              ast.UAdd: operator.pos, ast.USub: operator.neg}
CALCULATOR_CHARACTERS = set("0123456789+-*/(). ")


def _evaluate(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    raise ValueError("unsupported expression")


def calculate(expression: str, invalid: str = "Error: invalid characters in expression") -> str:
    """Arithmetic over the characters the benchmark allows, rounded to cents; its errors read
    "Error: <what Python says>"."""
    if not all(char in CALCULATOR_CHARACTERS for char in expression):
        raise ToolError(invalid)
    try:
        return str(round(float(_evaluate(ast.parse(expression, filename="<string>", mode="eval"))), 2))
    except (SyntaxError, ArithmeticError, ValueError) as exc:
        raise ToolError(f"Error: {exc}") from exc


def second_leg_day(first_arrival: str, day: str) -> str:
    """The date a one-stop search gives the second leg: `day`, or, when the first leg lands after
    midnight ("+1"), the next day of the month in May 2024, as both benchmarks count it."""
    if "+1" not in first_arrival:
        return day
    try:
        return f"2024-05-{int(day[-2:]) + 1}"
    except ValueError as exc:
        raise ToolError(f"Error: {exc}") from exc


# --- the desk ---------------------------------------------------------------------------------
# The benchmark's error texts, by situation (τ²-bench's desk words some of them differently).
MESSAGES = {
    "user_missing": "Error: user not found",
    "owner_missing": "Error: '{user_id}'",
    "reservation_missing": "Error: reservation not found",
    "details_missing": "Error: user not found",  # sic: the benchmark's text
    "flight_missing": "Error: flight {number} not found",
    "flight_date_missing": "Error: flight {number} not found on date {date}",
    "flight_unavailable": "Error: flight {number} not available on date {date}",
    "no_seats": "Error: not enough seats on flight {number}",
    "method_missing": "Error: payment method {payment_id} not found",
    "balance_short": "Error: not enough balance in payment method {payment_id}",
    "total_mismatch": "Error: payment amount does not add up, total price is {total}, but paid {paid}",
    "update_method_missing": "Error: payment method not found",
    "certificate_update": "Error: certificate cannot be used to update reservation",
    "gift_short": "Error: gift card balance is not enough",
    "passenger_count": "Error: number of passengers does not match",
    "invalid_expression": "Error: invalid characters in expression",
}


class Desk:
    """The airline tools over one session. Each method returns the text the benchmark's tool
    returns, or raises `ToolError` with its error text; `touched` collects the (table, id) of the
    users and reservations changed since last taken (a step's state change).

    `messages`, `takes_seats` (a booking takes its seats off the flights) and `updates_cabin`
    (changing flights sets the reservation's cabin) are what τ²-bench's desk changes
    (`tau2_desk.Tau2Desk`)."""

    messages: dict[str, str] = MESSAGES
    takes_seats = False
    updates_cabin = False

    def __init__(self, session: Session) -> None:
        self.session = session
        self.touched: set[tuple[str, str]] = set()

    # helpers
    def _error(self, situation: str, **fields: Any) -> ToolError:
        return ToolError(self.messages[situation].format(**fields))

    def _booking_id(self) -> str:
        """The next booking's id: the first of BOOKING_IDS not taken; a fourth booking reuses the
        third id (and overwrites that booking, as the benchmark's does)."""
        taken = set(self.session.scalars(select(m.Reservation.reservation_id)
                                         .where(m.Reservation.reservation_id.in_(BOOKING_IDS))))
        return next((i for i in BOOKING_IDS if i not in taken), BOOKING_IDS[-1])

    def _payment_amount(self, amount: Any) -> Any:
        """A booking's payment amount as the benchmark stores it (as given here)."""
        return amount

    def _user_text(self, user: m.User) -> str:
        return json.dumps(user_json(self.session, user))

    def _user(self, user_id: str) -> m.User | None:
        return self.session.get(m.User, user_id)

    def _methods(self, user_id: str) -> dict[str, m.PaymentMethod]:
        rows = self.session.scalars(select(m.PaymentMethod).where(m.PaymentMethod.user_id == user_id))
        return {p.payment_id: p for p in rows}

    def _next_position(self, model: type[Any], column: Any, value: str) -> int:
        last = self.session.scalar(select(func.max(model.position)).where(column == value))
        return 0 if last is None else last + 1

    def _flight_on(self, number: str, day: str, wanted: int, cabin: str) -> tuple[m.Flight, m.FlightDate]:
        """A flight bookable on a day for `wanted` passengers, or the benchmark's error."""
        flight = self.session.get(m.Flight, number)
        if flight is None:
            raise self._error("flight_missing", number=number)
        state = self.session.get(m.FlightDate, (number, day))
        if state is None:
            raise self._error("flight_date_missing", number=number, date=day)
        if state.status != "available":
            raise self._error("flight_unavailable", number=number, date=day)
        if getattr(state, f"seats_{cabin}") < wanted:
            raise self._error("no_seats", number=number)
        return flight, state

    def _add_payment(self, reservation_id: str, payment_id: str, amount: Any) -> None:
        position = self._next_position(m.Payment, m.Payment.reservation_id, reservation_id)
        self.session.add(m.Payment(reservation_id=reservation_id, position=position,
                                   payment_id=payment_id, amount=amount))

    def _reservation_text(self, reservation: m.Reservation) -> str:
        self.session.flush()
        return json.dumps(reservation_json(self.session, reservation))

    # tools
    def book_reservation(self, a: BookReservationArgs) -> str:
        user = self._user(a.user_id)
        if user is None:
            raise self._error("user_missing", user_id=a.user_id)
        payments = [(part.payment_id, self._payment_amount(part.amount)) for part in a.payment_methods]
        reservation_id = self._booking_id()
        legs, total, dated = [], 0, []
        for ref in a.flights:
            flight, state = self._flight_on(ref.flight_number, ref.date, len(a.passengers), a.cabin)
            price = getattr(state, f"price_{a.cabin}")
            legs.append({"origin": flight.origin, "destination": flight.destination,
                         "flight_number": ref.flight_number, "date": ref.date, "price": price})
            total += price * len(a.passengers)
            dated.append(state)
        if a.insurance == "yes":
            total += INSURANCE_PER_PASSENGER * len(a.passengers)
        total += BAG_FEE * a.nonfree_baggages
        methods = self._methods(a.user_id)
        for payment_id, amount in payments:
            method = methods.get(payment_id)
            if method is None:
                raise self._error("method_missing", payment_id=payment_id)
            if method.source in ("gift_card", "certificate") and method.amount < amount:
                raise self._error("balance_short", payment_id=payment_id)
        paid = sum(amount for _, amount in payments)
        if paid != total:
            raise self._error("total_mismatch", total=total, paid=paid)
        for payment_id, amount in payments:
            method = methods[payment_id]
            if method.source == "gift_card":
                method.amount -= amount
            elif method.source == "certificate":
                self.session.delete(method)
        if self.takes_seats:
            for state in dated:
                column = f"seats_{a.cabin}"
                setattr(state, column, getattr(state, column) - len(a.passengers))
        document = {
            "user_id": a.user_id, "origin": a.origin, "destination": a.destination,
            "flight_type": a.flight_type, "cabin": a.cabin, "flights": legs,
            "passengers": [p.model_dump() for p in a.passengers],
            "payment_history": [{"payment_id": pid, "amount": amount} for pid, amount in payments],
            "created_at": BOOKED_AT, "total_baggages": a.total_baggages,
            "nonfree_baggages": a.nonfree_baggages, "insurance": a.insurance,
        }
        existing = self.session.get(m.Reservation, reservation_id)
        if existing is not None:  # a fourth booking overwrites the third, as the benchmark's does
            for model in (m.ReservationFlight, m.ReservationPassenger, m.Payment):
                for row in self.session.scalars(select(model).where(model.reservation_id == reservation_id)):
                    self.session.delete(row)
            self.session.delete(existing)
            self.session.flush()
        last = self.session.scalar(select(func.max(m.Reservation.position)))
        position = 0 if last is None else last + 1
        reservation = reservation_row(reservation_id, document, position)
        self.session.add(reservation)
        self.session.add_all(reservation_parts(reservation_id, document))
        self.session.add(m.UserReservation(
            user_id=a.user_id, reservation_id=reservation_id,
            position=self._next_position(m.UserReservation, m.UserReservation.user_id, a.user_id)))
        self.touched |= {("users", a.user_id), ("reservations", reservation_id)}
        return self._reservation_text(reservation)

    def calculate(self, a: ExpressionArgs) -> str:
        return calculate(a.expression, self.messages["invalid_expression"])

    def cancel_reservation(self, a: ReservationArgs) -> str:
        reservation = self.session.get(m.Reservation, a.reservation_id)
        if reservation is None:
            raise self._error("reservation_missing", reservation_id=a.reservation_id)
        payments = list(self.session.scalars(select(m.Payment)
                                             .where(m.Payment.reservation_id == a.reservation_id)
                                             .order_by(m.Payment.position)))
        for offset, payment in enumerate(payments, len(payments)):
            self.session.add(m.Payment(reservation_id=a.reservation_id, position=offset,
                                       payment_id=payment.payment_id, amount=-payment.amount))
        reservation.status = "cancelled"
        self.touched.add(("reservations", a.reservation_id))
        return self._reservation_text(reservation)

    def get_reservation_details(self, a: ReservationArgs) -> str:
        reservation = self.session.get(m.Reservation, a.reservation_id)
        if reservation is None:
            raise self._error("details_missing", reservation_id=a.reservation_id)
        return self._reservation_text(reservation)

    def get_user_details(self, a: UserArgs) -> str:
        user = self._user(a.user_id)
        if user is None:
            raise self._error("user_missing", user_id=a.user_id)
        self.session.flush()
        return self._user_text(user)

    def list_all_airports(self) -> str:
        return json.dumps(AIRPORTS)

    def _dated(self, flight: m.Flight, day: str) -> dict[str, Any] | None:
        state = self.session.get(m.FlightDate, (flight.flight_number, day))
        return None if state is None else flight_date_json(state)

    def search_direct_flight(self, a: SearchArgs) -> str:
        results = []
        for flight in self.session.scalars(select(m.Flight).where(m.Flight.origin == a.origin,
                                                                 m.Flight.destination == a.destination)
                                           .order_by(m.Flight.position)):
            state = self._dated(flight, a.date)
            if state is not None and state["status"] == "available":
                results.append({**flight_json(flight), **state})
        return json.dumps(results)

    def search_onestop_flight(self, a: SearchArgs) -> str:
        """Pairs of flights through one airport. The second leg's date is the first's, or, when the
        first lands the next day ("+1"), the 2024-05 day after (unpadded, as the benchmark writes it);
        a second leg is listed with the first leg's date's fields, and a second leg that does not
        fly on that date fails the whole search with the benchmark's error text."""
        results = []
        firsts = self.session.scalars(select(m.Flight).where(m.Flight.origin == a.origin)
                                      .order_by(m.Flight.position))
        seconds = list(self.session.scalars(select(m.Flight).where(m.Flight.destination == a.destination)
                                            .order_by(m.Flight.position)))
        for first in firsts:
            for second in seconds:
                if first.destination != second.origin:
                    continue
                second_day = second_leg_day(first.scheduled_arrival_time_est, a.date)
                if first.scheduled_arrival_time_est > second.scheduled_departure_time_est:
                    continue
                first_state, second_state = self._dated(first, a.date), self._dated(second, second_day)
                if first_state is None or second_state is None:
                    continue
                if first_state["status"] == "available" and second_state["status"] == "available":
                    listed_state = self._dated(second, a.date)
                    if listed_state is None:
                        raise ToolError(f"Error: '{a.date}'")
                    results.append([{**flight_json(first), **first_state, "date": a.date},
                                    {**flight_json(second), **listed_state, "date": second_day}])
        return json.dumps(results)

    def send_certificate(self, a: CertificateArgs) -> str:
        if self._user(a.user_id) is None:
            raise self._error("user_missing", user_id=a.user_id)
        methods = self._methods(a.user_id)
        for payment_id in CERTIFICATE_IDS:
            if payment_id not in methods:
                position = self._next_position(m.PaymentMethod, m.PaymentMethod.user_id, a.user_id)
                self.session.add(m.PaymentMethod(user_id=a.user_id, payment_id=payment_id, position=position,
                                                 source="certificate", amount=a.amount))
                self.touched.add(("users", a.user_id))
                return f"Certificate {payment_id} added to user {a.user_id} with amount {a.amount}."
        # the benchmark's tool returns nothing here; an error says why
        raise ToolError(f"Error: user {a.user_id} already holds certificates {', '.join(CERTIFICATE_IDS)}")

    def think(self, a: ThinkArgs) -> str:
        return ""

    def transfer_to_human_agents(self, a: TransferArgs) -> str:
        return "Transfer successful"

    def _payable(self, reservation: m.Reservation, payment_id: str, price: Any) -> m.PaymentMethod:
        user = self._user(reservation.user_id)
        if user is None:
            raise self._error("owner_missing", user_id=reservation.user_id)
        method = self._methods(reservation.user_id).get(payment_id)
        if method is None:
            raise self._error("update_method_missing")
        if method.source == "certificate":
            raise self._error("certificate_update")
        if method.source == "gift_card" and method.amount < price:
            raise self._error("gift_short")
        return method

    def update_reservation_baggages(self, a: BaggageArgs) -> str:
        reservation = self.session.get(m.Reservation, a.reservation_id)
        if reservation is None:
            raise self._error("reservation_missing", reservation_id=a.reservation_id)
        price = BAG_FEE * max(0, a.nonfree_baggages - reservation.nonfree_baggages)
        method = self._payable(reservation, a.payment_id, price)
        reservation.total_baggages = a.total_baggages
        reservation.nonfree_baggages = a.nonfree_baggages
        if method.source == "gift_card":
            method.amount -= price
            self.touched.add(("users", reservation.user_id))
        if price != 0:
            self._add_payment(a.reservation_id, a.payment_id, price)
        self.touched.add(("reservations", a.reservation_id))
        return self._reservation_text(reservation)

    def update_reservation_flights(self, a: UpdateFlightsArgs) -> str:
        reservation = self.session.get(m.Reservation, a.reservation_id)
        if reservation is None:
            raise self._error("reservation_missing", reservation_id=a.reservation_id)
        old = list(self.session.scalars(select(m.ReservationFlight)
                                        .where(m.ReservationFlight.reservation_id == a.reservation_id)
                                        .order_by(m.ReservationFlight.position)))
        travellers = self.session.scalars(
            select(func.count()).select_from(m.ReservationPassenger)
            .where(m.ReservationPassenger.reservation_id == a.reservation_id)
        ).one()
        legs, total = [], 0
        for ref in a.flights:
            kept = [f for f in old if f.flight_number == ref.flight_number and f.date == ref.date
                    and a.cabin == reservation.cabin]
            if kept:  # an unchanged segment keeps the price it was bought at
                leg = {"origin": kept[0].origin, "destination": kept[0].destination, "price": kept[0].price}
            else:
                flight, state = self._flight_on(ref.flight_number, ref.date, travellers, a.cabin)
                leg = {"origin": flight.origin, "destination": flight.destination,
                       "price": getattr(state, f"price_{a.cabin}")}
            total += leg["price"] * travellers
            legs.append({**leg, "flight_number": ref.flight_number, "date": ref.date})
        total -= sum(f.price for f in old) * travellers
        method = self._payable(reservation, a.payment_id, total)
        if method.source == "gift_card":
            method.amount -= total
            self.touched.add(("users", reservation.user_id))
        for row in old:
            self.session.delete(row)
        self.session.flush()
        self.session.add_all(m.ReservationFlight(reservation_id=a.reservation_id, position=pos, **leg)
                             for pos, leg in enumerate(legs))
        if total != 0:
            self._add_payment(a.reservation_id, a.payment_id, total)
        if self.updates_cabin:
            reservation.cabin = a.cabin
        self.touched.add(("reservations", a.reservation_id))
        return self._reservation_text(reservation)

    def update_reservation_passengers(self, a: UpdatePassengersArgs) -> str:
        reservation = self.session.get(m.Reservation, a.reservation_id)
        if reservation is None:
            raise self._error("reservation_missing", reservation_id=a.reservation_id)
        old = list(self.session.scalars(select(m.ReservationPassenger)
                                        .where(m.ReservationPassenger.reservation_id == a.reservation_id)))
        if len(a.passengers) != len(old):
            raise self._error("passenger_count")
        for row in old:
            self.session.delete(row)
        self.session.flush()
        self.session.add_all(
            m.ReservationPassenger(reservation_id=a.reservation_id, position=pos, **p.model_dump())
            for pos, p in enumerate(a.passengers))
        self.touched.add(("reservations", a.reservation_id))
        return self._reservation_text(reservation)
