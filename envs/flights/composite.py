"""Tools of the coarse and fine Flights-v0 levels built from the default tools' own code.

`offers` fixes a level's tool table; `Composite` lets one agent call run several default tools
with one roll of the busy service and churn, and holds the checks both levels make before
they write (the card rule of `book_flight`, fares read fresh from the database).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import Row, bindparam, select

from agentrl.core import ToolError
from agentrl.flights import models as m
from agentrl.flights.env import FlightsEnv

E = TypeVar("E", bound=type[FlightsEnv])
# plain-row reads: fresh from the database whether the tools write through the ORM or Core
_FARE = select(m.Fare.price, m.Fare.refund_pct, m.Fare.change_fee).where(
    m.Fare.flight_id == bindparam("flight_id"), m.Fare.cabin == bindparam("cabin")
)


def offers(*names: str) -> Callable[[E], E]:
    """Keep only these tools, in this order: a level's table is chosen, not just extended."""

    def keep(cls: E) -> E:
        cls.tools = {name: cls.tools[name] for name in names}
        return cls

    return keep


class Composite(FlightsEnv):
    """Tools made of the default tools' code: one service roll per call the agent makes."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._inside = False

    def _service(self) -> None:
        if not self._inside:
            super()._service()

    @contextmanager
    def _one_call(self) -> Iterator[None]:
        """Run the busy service and churn once, then the inner tools without them."""
        self._service()
        self._inside = True
        try:
            yield
        finally:
            self._inside = False

    def _fare_row(self, flight_id: int, cabin: str) -> Row[Any]:
        """(price, refund_pct, change_fee) of a flight's cabin, read from the database now."""
        return self.session.connection().execute(_FARE, {"flight_id": flight_id, "cabin": cabin}).one()

    def _check_payer(self, payment_method_id: str, passenger_ids: list[str]) -> None:
        """The card rule of `book_flight`, checked before a composite call writes anything."""
        owner = self.world.methods.get(payment_method_id, {}).get("passenger_id")
        if owner is not None and owner not in passenger_ids:
            raise ToolError(
                f"payment method {payment_method_id} belongs to a customer who is not on this booking; "
                "pay with a method of one of its passengers"
            )
