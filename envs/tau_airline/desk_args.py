"""The airline tools' arguments: one pydantic model per tool that takes any, as τ-bench names and types them.

The tool specs the agent sees are built from these models (their fields' descriptions included), and
each call's arguments are validated against them before the desk (`desk.Desk`) runs it; kept apart
from the desk, which is the tools' behaviour, so that both τ-bench's desk and τ²-bench's
(`tau2_desk`) read the same arguments.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Cabin = Literal["basic_economy", "economy", "business"]
Number = int | float  # kept as given: the benchmark's comparison tells 250 from 250.0

PAYMENT_ID = "A payment id from the user's profile, such as 'credit_card_7815826' or 'gift_card_7815826'."
RESERVATION_ID = "The reservation id, such as 'ZFA04Y'."
USER_ID = "The user id, such as 'sara_doe_496'."
AIRPORT = "An airport's three-letter IATA code, such as 'JFK'."
DATE = "A date as YYYY-MM-DD, such as '2024-05-01'."


# --- arguments --------------------------------------------------------------------------------
class FlightRef(BaseModel):
    flight_number: str = Field(description="A flight number, such as 'HAT001'.")
    date: str = Field(description=DATE)


class PassengerArgs(BaseModel):
    first_name: str = Field(description="First name, such as 'Noah'.")
    last_name: str = Field(description="Last name, such as 'Brown'.")
    dob: str = Field(description="Date of birth as YYYY-MM-DD.")


class PaymentArgs(BaseModel):
    payment_id: str = Field(description=PAYMENT_ID)
    amount: Number = Field(description="The amount paid with this method.")


class BookReservationArgs(BaseModel):
    user_id: str = Field(description=USER_ID)
    origin: str = Field(description=AIRPORT)
    destination: str = Field(description=AIRPORT)
    flight_type: Literal["one_way", "round_trip"]
    cabin: Cabin
    flights: list[FlightRef] = Field(description="Every flight segment of the reservation.")
    passengers: list[PassengerArgs] = Field(description="Every passenger of the reservation.")
    payment_methods: list[PaymentArgs] = Field(description="How the total is paid, split over methods.")
    total_baggages: int = Field(description="Checked bags in all.")
    nonfree_baggages: int = Field(description="Checked bags that are paid for.")
    insurance: Literal["yes", "no"]


class ExpressionArgs(BaseModel):
    expression: str = Field(description="Numbers, + - * /, parentheses and spaces, such as '2 + 2'.")


class ReservationArgs(BaseModel):
    reservation_id: str = Field(description=RESERVATION_ID)


class UserArgs(BaseModel):
    user_id: str = Field(description=USER_ID)


class SearchArgs(BaseModel):
    origin: str = Field(description=AIRPORT)
    destination: str = Field(description=AIRPORT)
    date: str = Field(description=DATE)


class CertificateArgs(BaseModel):
    user_id: str = Field(description=USER_ID)
    amount: Number = Field(description="The certificate's amount.")


class ThinkArgs(BaseModel):
    thought: str = Field(description="The thought.")


class TransferArgs(BaseModel):
    summary: str = Field(description="A summary of the customer's issue.")


class BaggageArgs(BaseModel):
    reservation_id: str = Field(description=RESERVATION_ID)
    total_baggages: int = Field(description="The new number of checked bags in all.")
    nonfree_baggages: int = Field(description="The new number of paid checked bags.")
    payment_id: str = Field(description=PAYMENT_ID)


class UpdateFlightsArgs(BaseModel):
    reservation_id: str = Field(description=RESERVATION_ID)
    cabin: Cabin
    flights: list[FlightRef] = Field(
        description="Every flight of the whole new reservation, unchanged ones too.")
    payment_id: str = Field(description=PAYMENT_ID)


class UpdatePassengersArgs(BaseModel):
    reservation_id: str = Field(description=RESERVATION_ID)
    passengers: list[PassengerArgs] = Field(description="Every passenger of the reservation.")
