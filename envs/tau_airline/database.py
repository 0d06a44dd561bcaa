"""The airline documents in and out of SQLite: a template per data folder, a page copy per episode.

`template_image` loads τ-bench's JSON documents into rows once per data folder and keeps the
database's image; every episode `deserialize`s it into a private in-memory connection (as
Flights-v0 does), so no SQL is replayed per episode. `documents` reads a database back into the
benchmark's JSON shapes: the tools answer with them, and `state_key` (the benchmark's
comparison of final databases) is built from them.
"""

from __future__ import annotations

import hashlib
import sqlite3
from typing import Any

from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session
from sqlalchemy.pool import StaticPool

from agentrl.tau_airline import models as m
from agentrl.tau_airline.data import AirlineData

CABINS = ("basic_economy", "economy", "business")
DATE_TIMES = ("actual_departure_time_est", "actual_arrival_time_est",
              "estimated_departure_time_est", "estimated_arrival_time_est")


def new_engine() -> Any:
    """An engine bound to one private in-memory SQLite connection (the episode's database)."""
    return create_engine("sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False})


def document_rows(data: AirlineData) -> list[m.Base]:
    """The domain's documents as ORM rows, in document order."""
    rows: list[m.Base] = []
    for u_pos, (user_id, user) in enumerate(data.users.items()):
        rows.append(m.User(user_id=user_id, position=u_pos, first_name=user["name"]["first_name"],
                           last_name=user["name"]["last_name"], address=user["address"],
                           email=user["email"], dob=user["dob"], membership=user["membership"]))
        for pos, (payment_id, method) in enumerate(user["payment_methods"].items()):
            rows.append(m.PaymentMethod(user_id=user_id, payment_id=payment_id, position=pos,
                                        source=method["source"], brand=method.get("brand"),
                                        last_four=method.get("last_four"), amount=method.get("amount")))
        for pos, p in enumerate(user["saved_passengers"]):
            rows.append(m.SavedPassenger(user_id=user_id, position=pos, first_name=p["first_name"],
                                         last_name=p["last_name"], dob=p["dob"]))
        for pos, reservation_id in enumerate(user["reservations"]):
            rows.append(m.UserReservation(user_id=user_id, position=pos, reservation_id=reservation_id))
    for f_pos, (number, flight) in enumerate(data.flights.items()):
        rows.append(m.Flight(flight_number=number, position=f_pos, origin=flight["origin"],
                             destination=flight["destination"],
                             scheduled_departure_time_est=flight["scheduled_departure_time_est"],
                             scheduled_arrival_time_est=flight["scheduled_arrival_time_est"]))
        for pos, (day, state) in enumerate(flight["dates"].items()):
            seats, prices = state.get("available_seats", {}), state.get("prices", {})
            rows.append(m.FlightDate(
                flight_number=number, date=day, position=pos, status=state["status"],
                **{f"seats_{c}": seats.get(c) for c in CABINS},
                **{f"price_{c}": prices.get(c) for c in CABINS},
                **{t: state.get(t) for t in DATE_TIMES},
            ))
    for r_pos, (reservation_id, r) in enumerate(data.reservations.items()):
        rows.append(reservation_row(reservation_id, r, r_pos))
        rows.extend(reservation_parts(reservation_id, r))
    return rows


def reservation_row(reservation_id: str, r: dict[str, Any], position: int) -> m.Reservation:
    return m.Reservation(
        reservation_id=reservation_id, position=position, user_id=r["user_id"], origin=r["origin"],
        destination=r["destination"], flight_type=r["flight_type"], cabin=r["cabin"],
        created_at=r["created_at"], total_baggages=r["total_baggages"],
        nonfree_baggages=r["nonfree_baggages"], insurance=r["insurance"], status=r.get("status"),
    )


def reservation_parts(reservation_id: str, r: dict[str, Any]) -> list[m.Base]:
    """A reservation's flights, passengers and payments as rows."""
    return [
        *(m.ReservationFlight(reservation_id=reservation_id, position=pos, origin=f["origin"],
                              destination=f["destination"], flight_number=f["flight_number"],
                              date=f["date"], price=f["price"]) for pos, f in enumerate(r["flights"])),
        *(m.ReservationPassenger(reservation_id=reservation_id, position=pos, first_name=p["first_name"],
                                 last_name=p["last_name"], dob=p["dob"])
          for pos, p in enumerate(r["passengers"])),
        *(m.Payment(reservation_id=reservation_id, position=pos, payment_id=p["payment_id"],
                    amount=p["amount"]) for pos, p in enumerate(r["payment_history"])),
    ]


def template_image(data: AirlineData) -> bytes:
    """The domain's database image, built on first use and kept with the loaded data."""
    with data.lock:
        image = data.cache.get("image")
        if image is None:
            engine = new_engine()
            m.Base.metadata.create_all(engine)
            by_table: dict[Any, list[dict[str, Any]]] = {}
            for row in document_rows(data):
                table = type(row).__table__
                by_table.setdefault(table, []).append({c.key: getattr(row, c.key) for c in table.columns})
            with engine.begin() as conn:  # executemany per table: the ORM's unit of work is 10x slower
                for table in m.Base.metadata.sorted_tables:
                    if by_table.get(table):
                        conn.execute(table.insert(), by_table[table])
            image = engine.raw_connection().driver_connection.serialize()
            engine.dispose()
            data.cache["image"] = image
        return image


class EpisodeDatabase:
    """One episode's private copy of the airline database: engine, raw connection, ORM session."""

    def __init__(self, image: bytes) -> None:
        self.engine = new_engine()
        self.raw: sqlite3.Connection = self.engine.raw_connection().driver_connection
        self.raw.deserialize(image)
        self.session = Session(self.engine, expire_on_commit=False, autoflush=True)

    def copy(self) -> EpisodeDatabase:
        """An independent copy, page by page (a fork's database). The open transaction is committed
        first: a copy of the pages holds committed changes only."""
        self.session.commit()
        return EpisodeDatabase(self.raw.serialize())

    def close(self) -> None:
        self.session.close()
        self.engine.dispose()


# --- reading documents back ---------------------------------------------------------------------
def payment_method_json(p: m.PaymentMethod) -> dict[str, Any]:
    out: dict[str, Any] = {"source": p.source}
    if p.brand is not None:
        out["brand"] = p.brand
    if p.last_four is not None:
        out["last_four"] = p.last_four
    if p.amount is not None:
        out["amount"] = p.amount
    out["id"] = p.payment_id
    return out


def user_json(session: Session, user: m.User) -> dict[str, Any]:
    uid = user.user_id
    methods = session.scalars(select(m.PaymentMethod).where(m.PaymentMethod.user_id == uid)
                              .order_by(m.PaymentMethod.position))
    saved = session.scalars(select(m.SavedPassenger).where(m.SavedPassenger.user_id == uid)
                            .order_by(m.SavedPassenger.position))
    listed = session.scalars(select(m.UserReservation.reservation_id).where(m.UserReservation.user_id == uid)
                             .order_by(m.UserReservation.position))
    return {
        "name": {"first_name": user.first_name, "last_name": user.last_name},
        "address": user.address,
        "email": user.email,
        "dob": user.dob,
        "payment_methods": {p.payment_id: payment_method_json(p) for p in methods},
        "saved_passengers": [{"first_name": p.first_name, "last_name": p.last_name, "dob": p.dob}
                             for p in saved],
        "membership": user.membership,
        "reservations": list(listed),
    }


def reservation_json(session: Session, r: m.Reservation) -> dict[str, Any]:
    rid = r.reservation_id

    def rows(model: type[Any]) -> list[Any]:
        query = select(model).where(model.reservation_id == rid).order_by(model.position)
        return list(session.scalars(query))

    return _reservation_doc(r, rows(m.ReservationFlight), rows(m.ReservationPassenger), rows(m.Payment))


def _reservation_doc(r: m.Reservation, flights: list[m.ReservationFlight],
                     passengers: list[m.ReservationPassenger], payments: list[m.Payment]) -> dict[str, Any]:
    out = {
        "reservation_id": r.reservation_id, "user_id": r.user_id, "origin": r.origin,
        "destination": r.destination, "flight_type": r.flight_type, "cabin": r.cabin,
        "flights": [{"origin": f.origin, "destination": f.destination, "flight_number": f.flight_number,
                     "date": f.date, "price": f.price} for f in flights],
        "passengers": [{"first_name": p.first_name, "last_name": p.last_name, "dob": p.dob}
                       for p in passengers],
        "payment_history": [{"payment_id": p.payment_id, "amount": p.amount} for p in payments],
        "created_at": r.created_at, "total_baggages": r.total_baggages,
        "nonfree_baggages": r.nonfree_baggages, "insurance": r.insurance,
    }
    if r.status is not None:
        out["status"] = r.status
    return out


def flight_date_json(d: m.FlightDate) -> dict[str, Any]:
    out: dict[str, Any] = {"status": d.status}
    if d.seats_economy is not None:
        out["available_seats"] = {c: getattr(d, f"seats_{c}") for c in CABINS}
    if d.price_economy is not None:
        out["prices"] = {c: getattr(d, f"price_{c}") for c in CABINS}
    for name in DATE_TIMES:
        if (value := getattr(d, name)) is not None:
            out[name] = value
    return out


def flight_json(f: m.Flight) -> dict[str, Any]:
    """A flight without its dates (what searches list, before the date's own fields)."""
    return {"flight_number": f.flight_number, "origin": f.origin, "destination": f.destination,
            "scheduled_departure_time_est": f.scheduled_departure_time_est,
            "scheduled_arrival_time_est": f.scheduled_arrival_time_est}


def _grouped(session: Session, model: type[Any], key: str) -> dict[str, list[Any]]:
    """Every row of a child table, by parent id, in list order: one query, not one per parent."""
    out: dict[str, list[Any]] = {}
    for row in session.scalars(select(model).order_by(getattr(model, key), model.position)):
        out.setdefault(getattr(row, key), []).append(row)
    return out


def documents(session: Session) -> dict[str, Any]:
    """The whole database in the benchmark's shape: {"users", "flights", "reservations"}."""
    session.flush()
    methods = _grouped(session, m.PaymentMethod, "user_id")
    saved = _grouped(session, m.SavedPassenger, "user_id")
    listed = _grouped(session, m.UserReservation, "user_id")
    users = {}
    for u in session.scalars(select(m.User).order_by(m.User.position)):
        users[u.user_id] = {
            "name": {"first_name": u.first_name, "last_name": u.last_name},
            "address": u.address, "email": u.email, "dob": u.dob,
            "payment_methods": {p.payment_id: payment_method_json(p) for p in methods.get(u.user_id, [])},
            "saved_passengers": [{"first_name": p.first_name, "last_name": p.last_name, "dob": p.dob}
                                 for p in saved.get(u.user_id, [])],
            "membership": u.membership,
            "reservations": [x.reservation_id for x in listed.get(u.user_id, [])],
        }
    dates = _grouped(session, m.FlightDate, "flight_number")
    flights = {f.flight_number: {**flight_json(f), "dates": {d.date: flight_date_json(d)
                                                              for d in dates.get(f.flight_number, [])}}
               for f in session.scalars(select(m.Flight).order_by(m.Flight.position))}
    legs = _grouped(session, m.ReservationFlight, "reservation_id")
    people = _grouped(session, m.ReservationPassenger, "reservation_id")
    paid = _grouped(session, m.Payment, "reservation_id")
    reservations = {r.reservation_id: _reservation_doc(r, legs.get(r.reservation_id, []),
                                                       people.get(r.reservation_id, []),
                                                       paid.get(r.reservation_id, []))
                    for r in session.scalars(select(m.Reservation).order_by(m.Reservation.position))}
    return {"users": users, "flights": flights, "reservations": reservations}


# Rows whose `position` is a dict's key order, which the benchmark's comparison ignores (a user's
# payment methods, the reservations): compared by primary key alone. Every other position is a
# list's order, which it counts.
_UNORDERED = {"payment_methods", "reservations", "users", "flights", "flight_dates"}


def state_key(session: Session) -> str:
    """The database as the benchmark compares it, as one digest: every row of every table by primary
    key, with the text of every value (so 250 and 250.0 differ, as they do in the benchmark's hash)
    and list order counted, dict order not. Equal digests mean equal `documents`."""
    session.flush()
    raw = session.connection().connection.driver_connection
    assert raw is not None, "an open session's connection has its driver's"
    digest = hashlib.sha256()
    for table in m.Base.metadata.sorted_tables:
        columns = [c.name for c in table.columns if not (table.name in _UNORDERED and c.name == "position")]
        keys = ", ".join(c.name for c in table.primary_key.columns)
        digest.update(table.name.encode())
        for row in raw.execute(f"SELECT {', '.join(columns)} FROM {table.name} ORDER BY {keys}"):
            digest.update(repr(row).encode())
    return digest.hexdigest()
