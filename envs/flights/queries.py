"""Read and write helpers of the flight tools, over the episode's database.

Kept apart from the tools so that `desk_tools.py` reads as the tools themselves; every method assumes
`self.session` (the episode database) and `self.world` (its static rows) are set.

Every statement here is built once, at import: a step is about a millisecond, and building a
`select`, loading ORM objects or flushing a unit of work costs more than the SQL itself
(`session.get` plus a flush made `book_flight` ~2 ms). Reads return plain rows (named tuples),
writes are single Core statements, all in the session's transaction, committed by the tool.
Results with several rows are read with `.all()` (one `fetchall`; iterating a result fetches row
by row). A search's prices and seats sold, the hottest read, need no SQL: they are the world's
template figures plus the episode's net changes, which the change log keeps (see `_summaries`).
"""

from __future__ import annotations

import sqlite3
from types import SimpleNamespace
from typing import Any, NamedTuple

from sqlalchemy import Connection, Row, bindparam, delete, insert, select, update
from sqlalchemy.orm import Session

from agentrl.core import ToolError
from agentrl.flights import models as m
from agentrl.flights.changes import ChangeLog
from agentrl.flights.world import CABIN_SEATS, CABINS, POSITIONS, SEAT_INFO, World

_Seat, _Fare, _Booking, _Method = m.OccupiedSeat, m.Fare, m.Booking, m.PaymentMethod

# --- reads -----------------------------------------------------------------------------------------
_TAKEN = select(_Seat.seat_no).where(_Seat.flight_id == bindparam("flight_id"))
FARE = select(_Fare.price, _Fare.refund_pct, _Fare.change_fee, _Fare.changeable).where(
    _Fare.flight_id == bindparam("flight_id"), _Fare.cabin == bindparam("cabin")
)
FLIGHT_FARES = select(_Fare.cabin, _Fare.refund_pct, _Fare.change_fee, _Fare.changeable).where(
    _Fare.flight_id == bindparam("flight_id")
)
BOOKING = select(_Booking.__table__).where(_Booking.pnr == bindparam("pnr"))
METHOD = select(_Method.id, _Method.balance).where(_Method.id == bindparam("pm_id"))
PAYMENT_METHODS = select(_Method.id, _Method.kind, _Method.balance).where(
    _Method.passenger_id == bindparam("passenger_id")
)
PASSENGER_PNRS = select(_Booking.pnr).where(_Booking.passenger_id == bindparam("passenger_id"))

# --- writes (bind names differ from column names: SQLAlchemy keeps those for the SET clause) ---
ADD_BOOKING = insert(_Booking)
ADD_SEAT = insert(_Seat)
ADD_PAYMENT = insert(m.Payment)
FREE_SEAT = delete(_Seat).where(
    _Seat.flight_id == bindparam("at_flight"), _Seat.seat_no == bindparam("at_seat")
)
SET_BALANCE = update(_Method).where(_Method.id == bindparam("pm_id")).values(balance=bindparam("new_balance"))
SET_PRICE = (
    update(_Fare)
    .where(_Fare.flight_id == bindparam("at_flight"), _Fare.cabin == bindparam("at_cabin"))
    .values(price=bindparam("new_price"))
)
CANCEL = update(_Booking).where(_Booking.pnr == bindparam("at_pnr")).values(status="cancelled")
MOVE = (
    update(_Booking)
    .where(_Booking.pnr == bindparam("at_pnr"))
    .values(flight_id=bindparam("new_flight"), seat_no=bindparam("new_seat"), fare_paid=bindparam("new_fare"))
)


class ChangeCost(NamedTuple):
    """What moving a booking to another flight charges: the old fare's change fee plus any higher fare."""

    fee: int
    price: int  # the new flight's fare per person
    difference: int  # the part of `price` above the fare paid (a lower fare is not refunded)


class WorldQueries:
    """Flights, seats, bookings and payments as the tools see and change them."""

    session: Session
    world: World
    _raw: sqlite3.Connection  # the session's own connection (see `EpisodeDatabase`)
    _changes: ChangeLog  # what the episode wrote so far (see `changes.py`)

    @property
    def _conn(self) -> Connection:
        """The episode database inside the session's transaction (begun if none is open)."""
        return self.session.connection()

    def _flight(self, flight_id: int) -> SimpleNamespace:
        # the schedule never changes during an episode: read it from the world, not SQL
        flight = self.world.flights.get(flight_id)
        if flight is None:
            raise ToolError(f"no flight with id {flight_id}")
        return SimpleNamespace(**flight)

    def _fare(self, flight_id: int, cabin: str) -> Row[int, int, int, bool]:
        """(price, refund_pct, change_fee, changeable) of a flight's cabin."""
        return self._conn.execute(FARE, {"flight_id": flight_id, "cabin": cabin}).one()

    def _change_cost(self, booking: Row[Any], new_flight_id: int) -> ChangeCost:
        """The charge of moving `booking` to `new_flight_id` (same cabin), at the current fares."""
        fee = self._fare(booking.flight_id, booking.cabin).change_fee
        price = self._fare(new_flight_id, booking.cabin).price
        return ChangeCost(fee, price, max(0, price - booking.fare_paid))

    def _free_seats(self, flight_id: int, cabin: str) -> dict[str, list[str]]:
        taken = set(self._conn.execute(_TAKEN, {"flight_id": flight_id}).scalars().all())
        free: dict[str, list[str]] = {p: [] for p in POSITIONS}
        for seat_no, _row, _letter, _cabin, position in CABIN_SEATS[
            (self.world.flights[flight_id]["aircraft"], cabin)
        ]:
            if seat_no not in taken:
                free[position].append(seat_no)
        return free

    def _summaries(self, flight_ids: list[int]) -> list[dict[str, Any]]:
        """Each flight's schedule, and per cabin its current price and seats left: the world's
        template figures plus the episode's net changes (`ChangeLog.now`), which the change log
        keeps from every write, so a search, the hottest tool, runs no SQL."""
        changes = self._changes.now(self._raw)
        prices, sold = changes.prices, changes.sold
        world_fares, free_counts = self.world.fares, self.world.free_counts
        out = []
        for fid in flight_ids:
            f = self.world.flights[fid]
            fares = {}
            for c in CABINS:
                key = (fid, c)
                free = free_counts[key]
                fares[c] = {
                    "price": prices.get(key, world_fares[key]["price"]),
                    "seats_left": free["window"] + free["aisle"] + free["middle"] - sold.get(key, 0),
                }
            out.append(
                {
                    "flight_id": fid,
                    "number": f["number"],
                    "origin": f["origin"],
                    "destination": f["destination"],
                    "date": f["date"],
                    "departs": f["departs"],
                    "arrives": f["arrives"],
                    "aircraft": f["aircraft"],
                    "fares": fares,
                }
            )
        return out

    def _booking(self, pnr: str) -> Row[Any]:
        """A booking's row (its columns as attributes)."""
        booking = self._conn.execute(BOOKING, {"pnr": pnr.strip().upper()}).first()
        if booking is None:
            raise ToolError(f"no booking with PNR {pnr!r}")
        return booking

    def _confirmed_booking(self, pnr: str, state: str = "is") -> Row[Any]:
        """A booking that can still be cancelled or changed; `state` words the error ("is already")."""
        booking = self._booking(pnr)
        if booking.status != "confirmed":
            raise ToolError(f"booking {booking.pnr} {state} {booking.status}")
        return booking

    def _booking_view(self, b: Row[Any]) -> dict[str, Any]:
        fare = self._fare(b.flight_id, b.cabin)
        return {
            "pnr": b.pnr,
            "passenger_id": b.passenger_id,
            "status": b.status,
            "cabin": b.cabin,
            "seat": b.seat_no,
            "fare_paid": b.fare_paid,
            "payment_method_id": b.payment_method_id,
            "flight": self._summaries([b.flight_id])[0],
            "fare_rules": {
                "refund_pct": fare.refund_pct,
                "change_fee": fare.change_fee,
                "changeable": fare.changeable,
            },
        }

    def _pick_seat(
        self, flight_id: int, cabin: str, seat: str | None, preference: str | None, count: int
    ) -> list[str]:
        free = self._free_seats(flight_id, cabin)
        if seat:
            seat = seat.strip().upper()
            info = SEAT_INFO[self.world.flights[flight_id]["aircraft"]].get(seat)
            if info is None or info[3] != cabin:
                raise ToolError(f"seat {seat} is not a {cabin} seat on flight {flight_id}")
            if seat not in free[info[4]]:
                raise ToolError(f"seat {seat} is already taken; check_seats shows what is free")
            return [seat]
        pool = free[preference] if preference else [s for p in POSITIONS for s in free[p]]
        if preference is None:
            pool.sort(key=lambda s: (int(s[:-1]), s[-1]))
        if len(pool) < count:
            what = f"{preference} seats" if preference else "seats"
            raise ToolError(f"only {len(pool)} {what} left in {cabin} on flight {flight_id}; {count} needed")
        return pool[:count]

    def _occupy(self, flight_id: int, seat_no: str, cabin: str, source: str, pnr: str | None) -> None:
        position = SEAT_INFO[self.world.flights[flight_id]["aircraft"]][seat_no][4]
        self._conn.execute(
            ADD_SEAT,
            {"flight_id": flight_id, "seat_no": seat_no, "cabin": cabin, "position": position,
             "source": source, "pnr": pnr},
        )

    def _release(self, flight_id: int, seat_no: str) -> None:
        self._conn.execute(FREE_SEAT, {"at_flight": flight_id, "at_seat": seat_no})

    def _charge(self, pm: Row[str, int], charges: list[tuple[str, str, int]]) -> int:
        """Ledger rows for `charges` ((pnr, kind, amount) each, in order) and the method's balance
        less their sum; returns the new balance."""
        conn = self._conn
        for pnr, kind, amount in charges:
            conn.execute(
                ADD_PAYMENT, {"pnr": pnr, "payment_method_id": pm.id, "kind": kind, "amount": amount}
            )
        balance = pm.balance - sum(amount for _pnr, _kind, amount in charges)
        if balance != pm.balance:  # as the ORM did: no UPDATE that changes nothing
            conn.execute(SET_BALANCE, {"pm_id": pm.id, "new_balance": balance})
        return balance

    def _check_passengers(self, passenger_ids: list[str]) -> None:
        for pid in passenger_ids:
            if pid not in self.world.passenger_ids:
                raise ToolError(f"no passenger {pid!r}")

    def _check_payer(self, payment_method_id: str, passenger_ids: list[str]) -> None:
        """The card rule: a method that belongs to a customer pays only for bookings that include them."""
        owner = self.world.methods.get(payment_method_id, {}).get("passenger_id")
        if owner is not None and owner not in passenger_ids:
            raise ToolError(
                f"payment method {payment_method_id} belongs to a customer who is not on this booking; "
                "pay with a method of one of its passengers"
            )

    def _payment_method(self, pm_id: str, amount: int) -> Row[str, int]:
        """(id, balance) of a method that can pay `amount`."""
        pm = self._conn.execute(METHOD, {"pm_id": pm_id}).first()
        if pm is None:
            raise ToolError(f"no payment method {pm_id!r}")
        if pm.balance < amount:
            raise ToolError(f"payment declined: {pm_id} has {pm.balance} CNY available, {amount} needed")
        return pm
