"""Read and write helpers of the flight tools, over the episode's ORM session.

Kept apart from the env so that `env.py` reads as the tools themselves; every method assumes
`self.session` (the episode database) and `self.world` (its static rows) are set.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from agentrl.core import ToolError
from agentrl.flights import models as m
from agentrl.flights.world import CABINS, CAPACITY, POSITIONS, SEAT_INFO, SEAT_MAPS, World

# Built once: the hot read paths skip statement construction and the ORM layer (plain rows)
_TAKEN = select(m.OccupiedSeat.seat_no).where(m.OccupiedSeat.flight_id == bindparam("flight_id"))
_FARES = select(m.Fare.flight_id, m.Fare.cabin, m.Fare.price).where(
    m.Fare.flight_id.in_(bindparam("ids", expanding=True))
)
_SOLD = (
    select(m.OccupiedSeat.flight_id, m.OccupiedSeat.cabin, func.count())
    .where(m.OccupiedSeat.flight_id.in_(bindparam("ids", expanding=True)))
    .group_by(m.OccupiedSeat.flight_id, m.OccupiedSeat.cabin)
)
PASSENGER = select(m.Passenger.id, m.Passenger.name, m.Passenger.email).where(
    m.Passenger.id == bindparam("passenger_id")
)
PAYMENT_METHODS = select(m.PaymentMethod.id, m.PaymentMethod.kind, m.PaymentMethod.balance).where(
    m.PaymentMethod.passenger_id == bindparam("passenger_id")
)
PASSENGER_PNRS = select(m.Booking.pnr).where(m.Booking.passenger_id == bindparam("passenger_id"))


class WorldQueries:
    """Flights, seats, bookings and payments as the tools see and change them."""

    session: Session
    world: World

    def _flight(self, flight_id: int) -> SimpleNamespace:
        # the schedule never changes during an episode: read it from the world, not SQL
        flight = self.world.flights.get(flight_id)
        if flight is None:
            raise ToolError(f"no flight with id {flight_id}")
        return SimpleNamespace(**flight)

    def _free_seats(self, flight_id: int, cabin: str) -> dict[str, list[str]]:
        taken = set(self.session.connection().scalars(_TAKEN, {"flight_id": flight_id}))
        free: dict[str, list[str]] = {p: [] for p in POSITIONS}
        for seat_no, _row, _letter, seat_cabin, position in SEAT_MAPS[
            self.world.flights[flight_id]["aircraft"]
        ]:
            if seat_cabin == cabin and seat_no not in taken:
                free[position].append(seat_no)
        return free

    def _summaries(self, flight_ids: list[int]) -> list[dict[str, Any]]:
        if not flight_ids:
            return []
        conn = self.session.connection()
        fares = {(fid, cabin): price for fid, cabin, price in conn.execute(_FARES, {"ids": flight_ids})}
        sold = {(fid, cabin): n for fid, cabin, n in conn.execute(_SOLD, {"ids": flight_ids})}
        out = []
        for fid in flight_ids:
            f = self.world.flights[fid]
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
                    "fares": {
                        c: {
                            "price": fares[(fid, c)],
                            "seats_left": CAPACITY[(f["aircraft"], c)] - sold.get((fid, c), 0),
                        }
                        for c in CABINS
                    },
                }
            )
        return out

    def _booking(self, pnr: str) -> m.Booking:
        booking = self.session.get(m.Booking, pnr.strip().upper())
        if booking is None:
            raise ToolError(f"no booking with PNR {pnr!r}")
        return booking

    def _booking_view(self, b: m.Booking) -> dict[str, Any]:
        fare = self.session.get(m.Fare, (b.flight_id, b.cabin))
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

    def _charge(self, pm: m.PaymentMethod, pnr: str, kind: str, amount: int) -> None:
        pm.balance -= amount
        self.session.add(m.Payment(pnr=pnr, payment_method_id=pm.id, kind=kind, amount=amount))

    def _payment_method(self, pm_id: str, amount: int) -> m.PaymentMethod:
        pm = self.session.get(m.PaymentMethod, pm_id)
        if pm is None:
            raise ToolError(f"no payment method {pm_id!r}")
        if pm.balance < amount:
            raise ToolError(f"payment declined: {pm_id} has {pm.balance} CNY available, {amount} needed")
        return pm
