"""The flight world's tables, as typed SQLAlchemy 2.0 ORM models.

Seat maps live with the aircraft (one row per seat of a type), and a flight's inventory is the
set of its `OccupiedSeat` rows: the primary key (flight, seat) is what makes selling a seat twice
impossible at the database level, not just in the tools' code.
"""

from __future__ import annotations

from sqlalchemy import ForeignKey, Index, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class Airport(Base):
    __tablename__ = "airports"

    code: Mapped[str] = mapped_column(String(3), primary_key=True)
    name: Mapped[str]
    city: Mapped[str]
    country: Mapped[str] = mapped_column(String(2))


class Carrier(Base):
    __tablename__ = "carriers"

    code: Mapped[str] = mapped_column(String(2), primary_key=True)
    name: Mapped[str]


class AircraftSeat(Base):
    """One seat of an aircraft type's map."""

    __tablename__ = "aircraft_seats"

    aircraft: Mapped[str] = mapped_column(String(8), primary_key=True)
    seat_no: Mapped[str] = mapped_column(String(4), primary_key=True)
    row: Mapped[int]
    letter: Mapped[str] = mapped_column(String(1))
    cabin: Mapped[str]  # economy | business
    position: Mapped[str]  # window | aisle | middle


class Flight(Base):
    __tablename__ = "flights"
    __table_args__ = (Index("ix_flights_route_date", "origin", "destination", "date"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    number: Mapped[str]
    carrier: Mapped[str] = mapped_column(ForeignKey("carriers.code"))
    origin: Mapped[str] = mapped_column(ForeignKey("airports.code"))
    destination: Mapped[str] = mapped_column(ForeignKey("airports.code"))
    date: Mapped[str]  # YYYY-MM-DD, local departure date
    departs: Mapped[str]  # HH:MM
    arrives: Mapped[str]  # HH:MM, "+1" suffix when the next day
    aircraft: Mapped[str]


class Fare(Base):
    """A cabin's current price and its fare rules."""

    __tablename__ = "fares"
    __table_args__ = {"sqlite_with_rowid": False}

    flight_id: Mapped[int] = mapped_column(ForeignKey("flights.id"), primary_key=True)
    cabin: Mapped[str] = mapped_column(primary_key=True)
    price: Mapped[int]  # CNY
    refund_pct: Mapped[int]  # share of the fare paid back on cancellation
    change_fee: Mapped[int]
    changeable: Mapped[bool]  # basic economy fares are not


class OccupiedSeat(Base):
    """A sold seat; `source` says who holds it (earlier sales, other customers now, or a booking)."""

    __tablename__ = "occupied_seats"
    # clustered on (flight, seat): half the pages of a rowid table plus its key index, so the
    # per-episode page copy is half as long. No other index: a search counts seats sold from the
    # world's figures and the episode's change log, not from this table (`WorldQueries._summaries`)
    __table_args__ = {"sqlite_with_rowid": False}

    flight_id: Mapped[int] = mapped_column(ForeignKey("flights.id"), primary_key=True)
    seat_no: Mapped[str] = mapped_column(String(4), primary_key=True)
    cabin: Mapped[str]
    position: Mapped[str]
    source: Mapped[str]  # presold | churn | booking
    pnr: Mapped[str | None] = mapped_column(ForeignKey("bookings.pnr"), default=None)


class Passenger(Base):
    __tablename__ = "passengers"

    id: Mapped[str] = mapped_column(primary_key=True)
    name: Mapped[str]
    email: Mapped[str]


class PaymentMethod(Base):
    __tablename__ = "payment_methods"

    id: Mapped[str] = mapped_column(primary_key=True)
    passenger_id: Mapped[str] = mapped_column(ForeignKey("passengers.id"))
    kind: Mapped[str]  # card | wallet
    label: Mapped[str]
    opening_balance: Mapped[int]
    balance: Mapped[int]


class Booking(Base):
    __tablename__ = "bookings"

    pnr: Mapped[str] = mapped_column(String(6), primary_key=True)
    passenger_id: Mapped[str] = mapped_column(ForeignKey("passengers.id"))
    flight_id: Mapped[int] = mapped_column(ForeignKey("flights.id"))
    cabin: Mapped[str]
    seat_no: Mapped[str] = mapped_column(String(4))
    fare_paid: Mapped[int]
    payment_method_id: Mapped[str] = mapped_column(ForeignKey("payment_methods.id"))
    status: Mapped[str]  # confirmed | cancelled


class Payment(Base):
    """The ledger: every movement of money, so balances can always be re-derived."""

    __tablename__ = "payments"

    id: Mapped[int] = mapped_column(primary_key=True)
    pnr: Mapped[str] = mapped_column(ForeignKey("bookings.pnr"))
    payment_method_id: Mapped[str] = mapped_column(ForeignKey("payment_methods.id"))
    kind: Mapped[str]  # fare | change_fee | fare_difference | refund
    amount: Mapped[int]  # positive: charged to the method; negative: paid back to it
