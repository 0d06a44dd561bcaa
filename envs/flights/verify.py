"""The verifier: judges an episode's declared outcome and final database, nothing the agent says.

Reward is 1 iff the agent declared the task's outcome (done, infeasible or refused) through
`finish` and the final database is the template plus exactly the expected changes (none unless
the outcome is "done") plus what other customers did meanwhile: any stray booking, missing
refund or overcharge scores 0.
"""

from __future__ import annotations

from operator import itemgetter

from sqlalchemy import select
from sqlalchemy.orm import Session

from agentrl.flights import models as m
from agentrl.flights.tasks import Task
from agentrl.flights.world import SEAT_INFO, World

# Built once; rows compared as whole tuples (column order) against the template's, which is what
# a judgement at the end of every episode can afford: about a tenth of a millisecond
_BOOKINGS = select(m.Booking.__table__)
_BALANCES = select(m.PaymentMethod.id, m.PaymentMethod.balance)
_as_row = itemgetter(*(c.name for c in m.Booking.__table__.columns))


def verify(session: Session, world: World, task: Task, outcome: str | None) -> bool:
    return outcome == task.outcome and state_matches(session, world, task)


def state_matches(session: Session, world: World, task: Task) -> bool:
    """Is the database the template plus exactly the expected changes (plus churn)?"""
    exp = task.expected
    conn = session.connection()
    bookings = {b[0]: b for b in conn.execute(_BOOKINGS).all()}  # by pnr, the first column
    template = world.bookings
    balance_delta: dict[str, int] = {}
    for pnr, row in template.items():
        now = bookings.get(pnr)
        if now is None:
            return False
        want = row
        pm = row["payment_method_id"]
        if exp.cancel and pnr == exp.cancel[0]:
            want = {**want, "status": "cancelled"}
            balance_delta[pm] = balance_delta.get(pm, 0) + exp.cancel[1]
        if exp.change and pnr == exp.change[0]:
            _pnr, flight, fee, diff = exp.change
            want = {**want, "flight_id": flight, "fare_paid": row["fare_paid"] + diff, "seat_no": now.seat_no}
            balance_delta[pm] = balance_delta.get(pm, 0) - fee - diff
            if not _seat_ok(world, flight, now.cabin, now.seat_no, exp.position):
                return False
        if tuple(now) != _as_row(want):
            return False
    new = sorted(
        (b.passenger_id, b.flight_id, b.cabin, b.fare_paid, b.payment_method_id, b.status)
        for pnr, b in bookings.items()
        if pnr not in template
    )
    want_new = sorted((p, f, c, price, exp.payment_method_id, "confirmed") for p, f, c, price in exp.new)
    if new != want_new:
        return False
    for pnr, b in bookings.items():
        if pnr not in template:
            if not _seat_ok(world, b.flight_id, b.cabin, b.seat_no, exp.position):
                return False
            balance_delta[b.payment_method_id] = balance_delta.get(b.payment_method_id, 0) - b.fare_paid
    # payment methods are never added or removed: every balance is its start plus the expected moves
    want_balances = {pm_id: start + balance_delta.get(pm_id, 0) for pm_id, start in world.balances.items()}
    return dict(conn.execute(_BALANCES).all()) == want_balances


def _seat_ok(world: World, flight_id: int, cabin: str, seat_no: str, position: str | None) -> bool:
    seat = SEAT_INFO[world.flights[flight_id]["aircraft"]].get(seat_no)
    return seat is not None and seat[3] == cabin and (position is None or seat[4] == position)
