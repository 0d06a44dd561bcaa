"""Consistency rules the flight world must keep whatever the agent does.

Each check derives the same quantity two ways (the tools' view and the raw tables) and returns
the violations found, so tests after random action sequences can say exactly what broke.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from agentrl.flights import models as m


def violations(session: Session, env: Any) -> list[str]:
    """Every broken invariant of the episode database `env` works on (empty when all hold)."""
    problems: list[str] = []
    # plain rows, not ORM objects: a world holds thousands of occupied seats
    bookings = list(session.execute(select(m.Booking.__table__)))
    occupied = {(o.flight_id, o.seat_no): o for o in session.execute(select(m.OccupiedSeat.__table__))}
    # no seat sold twice: confirmed bookings hold distinct seats, each backed by its occupied row
    held = Counter((b.flight_id, b.seat_no) for b in bookings if b.status == "confirmed")
    problems += [f"seat {k} held by {n} bookings" for k, n in held.items() if n > 1]
    for b in bookings:
        row = occupied.get((b.flight_id, b.seat_no))
        if b.status == "confirmed" and (row is None or row.pnr != b.pnr):
            problems.append(f"booking {b.pnr} has no occupied seat {b.seat_no}")
        if b.status == "cancelled" and row is not None and row.pnr == b.pnr:
            problems.append(f"cancelled booking {b.pnr} still holds seat {b.seat_no}")
    live = {b.pnr for b in bookings if b.status == "confirmed"}
    problems += [
        f"seat {k} held for inactive booking {o.pnr}"
        for k, o in occupied.items()
        if o.source == "booking" and o.pnr not in live
    ]
    # available + sold = capacity, per flight and cabin, with "available" as the tools report it
    capacity = dict(
        ((a, c), n)
        for a, c, n in session.execute(
            select(m.AircraftSeat.aircraft, m.AircraftSeat.cabin, func.count()).group_by(
                m.AircraftSeat.aircraft, m.AircraftSeat.cabin
            )
        )
    )
    sold = Counter((o.flight_id, o.cabin) for o in occupied.values())
    # flights the episode touched (bookings, other customers) plus a fixed sample of untouched ones
    touched = {o.flight_id for o in occupied.values() if o.source != "presold"} | {
        b.flight_id for b in bookings
    }
    flight_ids = sorted(touched | {fid for fid, _ in sold if fid % 10 == 1})
    for summary in env._summaries(flight_ids):
        for cabin, fare in summary["fares"].items():
            total = capacity[(summary["aircraft"], cabin)]
            if fare["seats_left"] + sold[(summary["flight_id"], cabin)] != total:
                problems.append(f"flight {summary['flight_id']} {cabin}: available + sold != {total}")
            free = env._free_seats(summary["flight_id"], cabin)
            if sum(len(v) for v in free.values()) != fare["seats_left"]:
                problems.append(f"flight {summary['flight_id']} {cabin}: seat map disagrees with seats_left")
    # the ledger balances: every method's balance is its opening balance minus what the ledger moved
    moved = dict(
        session.execute(
            select(m.Payment.payment_method_id, func.sum(m.Payment.amount)).group_by(
                m.Payment.payment_method_id
            )
        ).all()
    )
    for pm in session.execute(select(m.PaymentMethod.__table__)):
        if pm.balance != pm.opening_balance - (moved.get(pm.id) or 0):
            problems.append(f"payment method {pm.id}: balance {pm.balance} disagrees with the ledger")
        if pm.balance < 0:
            problems.append(f"payment method {pm.id} is overdrawn")
    paid = dict(
        session.execute(
            select(m.Payment.pnr, func.sum(m.Payment.amount))
            .where(m.Payment.kind.in_(("fare", "fare_difference")))
            .group_by(m.Payment.pnr)
        ).all()
    )
    problems += [
        f"booking {b.pnr}: fare_paid {b.fare_paid} != charged {paid.get(b.pnr)}"
        for b in bookings
        if paid.get(b.pnr) != b.fare_paid
    ]
    return problems
