"""The airline database as SQLAlchemy tables: τ-bench's JSON documents, normalised into rows.

Users, their payment methods, saved passengers and reservation lists; flights with one row per
date (status, seats and prices per cabin, actual or estimated times); reservations with their
flights, passengers and payments. `position` columns keep the documents' list order, which the
benchmark's comparison of databases counts.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Integer, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import UserDefinedType


class JsonNumber(UserDefinedType):
    """A number kept as the JSON gave it: an int stays an int, a float a float.

    The benchmark compares databases by the text of their values, so 250 and 250.0 differ; a column
    declared BLOB has no SQLite type affinity, which stores each value with its own type."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "BLOB"

    def compare_values(self, x: Any, y: Any) -> bool:
        """The ORM's "did it change" test: 300 -> 300.0 is a change to write, not equal values."""
        return type(x) is type(y) and x == y


class Base(DeclarativeBase):
    pass


class UserListRow:
    """A row of a list in a user's document: the user, then the row's place in that list (both the key).
    `sort_order` keeps them the table's first columns, as where each table declared them itself."""

    user_id: Mapped[str] = mapped_column(String, primary_key=True, sort_order=-1)
    position: Mapped[int] = mapped_column(Integer, primary_key=True, sort_order=-1)


class ReservationListRow:
    """A row of a list in a reservation's document: the reservation, then the row's place in that list."""

    reservation_id: Mapped[str] = mapped_column(String, primary_key=True, sort_order=-1)
    position: Mapped[int] = mapped_column(Integer, primary_key=True, sort_order=-1)


class Person:
    """A passenger's name and date of birth, as saved in a profile or listed on a reservation."""

    first_name: Mapped[str] = mapped_column(String)
    last_name: Mapped[str] = mapped_column(String)
    dob: Mapped[str] = mapped_column(String)


class User(Base):
    __tablename__ = "users"
    user_id: Mapped[str] = mapped_column(String, primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    first_name: Mapped[str] = mapped_column(String)
    last_name: Mapped[str] = mapped_column(String)
    address: Mapped[dict] = mapped_column(JSON)
    email: Mapped[str] = mapped_column(String)
    dob: Mapped[str] = mapped_column(String)
    membership: Mapped[str] = mapped_column(String)


class PaymentMethod(Base):
    __tablename__ = "payment_methods"
    user_id: Mapped[str] = mapped_column(String, primary_key=True)
    payment_id: Mapped[str] = mapped_column(String, primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String)
    brand: Mapped[str | None] = mapped_column(String, nullable=True)
    last_four: Mapped[str | None] = mapped_column(String, nullable=True)
    amount: Mapped[Any] = mapped_column(JsonNumber, nullable=True)


class SavedPassenger(UserListRow, Person, Base):
    __tablename__ = "saved_passengers"


class UserReservation(UserListRow, Base):
    """The reservation ids a user's profile lists (the benchmark keeps this list apart from the
    reservations' own `user_id`)."""

    __tablename__ = "user_reservations"
    reservation_id: Mapped[str] = mapped_column(String)


class Flight(Base):
    __tablename__ = "flights"
    flight_number: Mapped[str] = mapped_column(String, primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    origin: Mapped[str] = mapped_column(String, index=True)
    destination: Mapped[str] = mapped_column(String, index=True)
    scheduled_departure_time_est: Mapped[str] = mapped_column(String)
    scheduled_arrival_time_est: Mapped[str] = mapped_column(String)


class FlightDate(Base):
    """One flight on one date: its status, and the fields that status carries (seats and prices
    while available, actual or estimated times once delayed, flying or landed)."""

    __tablename__ = "flight_dates"
    flight_number: Mapped[str] = mapped_column(String, primary_key=True)
    date: Mapped[str] = mapped_column(String, primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String)
    seats_basic_economy: Mapped[int | None] = mapped_column(Integer, nullable=True)
    seats_economy: Mapped[int | None] = mapped_column(Integer, nullable=True)
    seats_business: Mapped[int | None] = mapped_column(Integer, nullable=True)
    price_basic_economy: Mapped[Any] = mapped_column(JsonNumber, nullable=True)
    price_economy: Mapped[Any] = mapped_column(JsonNumber, nullable=True)
    price_business: Mapped[Any] = mapped_column(JsonNumber, nullable=True)
    actual_departure_time_est: Mapped[str | None] = mapped_column(String, nullable=True)
    actual_arrival_time_est: Mapped[str | None] = mapped_column(String, nullable=True)
    estimated_departure_time_est: Mapped[str | None] = mapped_column(String, nullable=True)
    estimated_arrival_time_est: Mapped[str | None] = mapped_column(String, nullable=True)


class Reservation(Base):
    __tablename__ = "reservations"
    reservation_id: Mapped[str] = mapped_column(String, primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    user_id: Mapped[str] = mapped_column(String)
    origin: Mapped[str] = mapped_column(String)
    destination: Mapped[str] = mapped_column(String)
    flight_type: Mapped[str] = mapped_column(String)
    cabin: Mapped[str] = mapped_column(String)
    created_at: Mapped[str] = mapped_column(String)
    total_baggages: Mapped[Any] = mapped_column(JsonNumber)
    nonfree_baggages: Mapped[Any] = mapped_column(JsonNumber)
    insurance: Mapped[str] = mapped_column(String)
    status: Mapped[str | None] = mapped_column(String, nullable=True)  # set once cancelled


class ReservationFlight(ReservationListRow, Base):
    __tablename__ = "reservation_flights"
    origin: Mapped[str] = mapped_column(String)
    destination: Mapped[str] = mapped_column(String)
    flight_number: Mapped[str] = mapped_column(String)
    date: Mapped[str] = mapped_column(String)
    price: Mapped[Any] = mapped_column(JsonNumber)


class ReservationPassenger(ReservationListRow, Person, Base):
    __tablename__ = "reservation_passengers"


class Payment(ReservationListRow, Base):
    """One line of a reservation's payment history (refunds are negative lines)."""

    __tablename__ = "payments"
    payment_id: Mapped[str] = mapped_column(String)
    amount: Mapped[Any] = mapped_column(JsonNumber)
