"""Argument models of the flight tools: each is the tool's JSON schema and its validator."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, Field, field_validator

Cabin = Literal["economy", "business"]
Position = Literal["window", "aisle", "middle"]
DATE = r"^\d{4}-\d{2}-\d{2}$"
TIME = r"^\d{2}:\d{2}$"


class _Codes(BaseModel):
    @field_validator("origin", "destination", check_fields=False)
    @classmethod
    def _upper(cls, value: str | None) -> str | None:
        return value.strip().upper() if isinstance(value, str) else value


class SearchArgs(_Codes):
    # "from"/"to" are accepted too: a widespread booking-agent example spells them so
    origin: str = Field(
        min_length=3,
        max_length=3,
        validation_alias=AliasChoices("origin", "from"),
        description="IATA code of the departure airport, e.g. PEK.",
    )
    destination: str = Field(
        min_length=3,
        max_length=3,
        validation_alias=AliasChoices("destination", "to"),
        description="IATA code of the arrival airport, e.g. SHA.",
    )
    date: str = Field(pattern=DATE, description="Departure date, YYYY-MM-DD.")


class FilterArgs(_Codes):
    depart_after: str = Field("00:00", pattern=TIME, description="Earliest departure time, HH:MM.")
    depart_before: str = Field("23:59", pattern=TIME, description="Latest departure time, HH:MM.")
    max_price: int | None = Field(default=None, ge=0, description="Highest fare in CNY for the cabin.")
    cabin: Cabin | None = Field(
        None,
        description="Cabin whose fare is filtered and sorted on (economy if not given); "
        "if given, only flights with free seats in it.",
    )
    origin: str | None = Field(default=None, description="Keep only this departure airport.")
    destination: str | None = Field(default=None, description="Keep only this arrival airport.")
    sort_by: Literal["price", "departure"] | None = Field(
        default=None, description="Sort order of the results."
    )


class FlightArgs(BaseModel):
    flight_id: int = Field(description="The flight_id from search results.")


class SeatsArgs(BaseModel):
    flight_id: int
    cabin: Cabin
    position: Position | None = Field(default=None, description="Only seats of this type.")


class PassengerArgs(BaseModel):
    passenger_id: str


class BookArgs(BaseModel):
    flight_id: int
    cabin: Cabin
    passenger_ids: list[str] = Field(min_length=1, max_length=6, description="One seat per passenger.")
    payment_method_id: str
    seat: str | None = Field(default=None, description="Exact seat such as 12A (single passenger only).")
    seat_preference: Position | None = None


class BookingArgs(BaseModel):
    pnr: str = Field(min_length=1, max_length=12, description="Booking reference.")


class ChangeArgs(BaseModel):
    pnr: str = Field(min_length=1, max_length=12)
    new_flight_id: int
    seat: str | None = None
    seat_preference: Position | None = None


class FinishArgs(BaseModel):
    outcome: Literal["done", "infeasible", "refused"] = Field(
        description="done: the request was carried out; infeasible: no flight satisfies it; "
        "refused: the desk policy forbids it. Only this field is judged."
    )
    message: str = Field("", max_length=4000, description="Final message to the customer (not judged).")
