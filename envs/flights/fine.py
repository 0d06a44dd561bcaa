"""Flights-v0 at the fine level: paged search, and quote, hold, confirm for every write.

Search results come `PAGE_SIZE` a page. A hold lives in the episode's memory, never in the
database: while it lasts (`HOLD_TURNS` turns) its seats are kept from other customers and from
other holds; if it is not confirmed it expires, and nothing the verifier counts has changed.
Confirming runs the default `book_flight` / `change_booking` code on the held seats.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from agentrl.core import ToolError, tool
from agentrl.flights.composite import Composite, offers
from agentrl.flights.schemas import BookArgs, Cabin, ChangeArgs, Position, SearchArgs
from agentrl.flights.world import SEAT_INFO

PAGE_SIZE = 5
HOLD_TURNS = 5


class PageArgs(BaseModel):
    page: int = Field(ge=1, description="Page number of the last search's results, from 1.")


class QuoteArgs(BaseModel):
    flight_id: int
    cabin: Cabin
    passenger_ids: list[str] = Field(min_length=1, max_length=6, description="One seat per passenger.")


class QuoteChangeArgs(BaseModel):
    pnr: str = Field(min_length=1, max_length=12)
    new_flight_id: int


class HoldArgs(BaseModel):
    quote_id: str
    seat: str | None = Field(None, description="Exact seat such as 12A (single passenger only).")
    seat_preference: Position | None = None


class ConfirmArgs(BaseModel):
    hold_id: str
    payment_method_id: str | None = Field(
        None,
        description="Pays a new booking (required there); a change is charged to the booking's own method.",
    )


@offers(
    "search_flights",
    "results_page",
    "get_flight",
    "check_seats",
    "get_passenger",
    "get_booking",
    "cancel_booking",
    "quote_fare",
    "quote_change",
    "hold_seats",
    "confirm_hold",
    "finish",
)
class FineFlightsEnv(Composite):
    """Paged search; booking and changing as quote, hold, confirm."""

    granularity = "fine"
    default_max_turns = 60  # the same work takes more, smaller steps

    def _reset_world(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        text, info = super()._reset_world(options)
        self._quotes: dict[str, dict[str, Any]] = {}
        self._holds: dict[str, dict[str, Any]] = {}
        self._ids = 0
        self._confirming: dict[str, Any] | None = None
        return text, info

    def _new_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}{self._ids}"

    def _live_holds(self) -> dict[str, dict[str, Any]]:
        self._holds = {k: h for k, h in self._holds.items() if h["expires_at_turn"] >= self.turn}
        return self._holds

    def _free_seats(self, flight_id: int, cabin: str) -> dict[str, list[str]]:
        held = {s for h in self._live_holds().values() if h["flight_id"] == flight_id for s in h["seats"]}
        free = super()._free_seats(flight_id, cabin)
        return {p: [s for s in seats if s not in held] for p, seats in free.items()}

    def _pick_seat(
        self, flight_id: int, cabin: str, seat: str | None, preference: str | None, count: int
    ) -> list[str]:
        if self._confirming is not None:
            return list(self._confirming["seats"])
        return super()._pick_seat(flight_id, cabin, seat, preference, count)

    def _page(self, page: int) -> dict[str, Any]:
        pages = max(1, -(-len(self._last_search) // PAGE_SIZE))
        if page > pages:
            raise ToolError(f"page {page} does not exist; the last search has {pages} page(s)")
        chunk = self._last_search[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
        return {
            "count": len(self._last_search),
            "page": page,
            "pages": pages,
            "results": self._summaries(chunk),
        }

    @tool(
        "Search flights by origin, destination and date. Results include nearby airports of the same "
        f"cities, are not sorted, and come {PAGE_SIZE} per page: this returns page 1, results_page the rest."
    )
    def search_flights(self, args: SearchArgs) -> dict[str, Any]:
        super().search_flights(args)
        return self._page(1)

    @tool("One page of the last search_flights call's results.")
    def results_page(self, args: PageArgs) -> dict[str, Any]:
        self._service()
        if not self._last_search:
            raise ToolError("no results to page through: call search_flights first")
        return self._page(args.page)

    @tool("Quote the current fare of a flight's cabin for these passengers; a quote is needed to hold seats.")
    def quote_fare(self, args: QuoteArgs) -> dict[str, Any]:
        self._service()
        self._flight(args.flight_id)
        if len(set(args.passenger_ids)) != len(args.passenger_ids):
            raise ToolError("a passenger is listed twice")
        self._check_passengers(args.passenger_ids)
        self._maybe_change_fare()
        price = self._fare(args.flight_id, args.cabin).price
        quote = {
            "quote_id": self._new_id("Q"),
            "kind": "booking",
            "flight_id": args.flight_id,
            "cabin": args.cabin,
            "passenger_ids": list(args.passenger_ids),
            "price_per_person": price,
            "total": price * len(args.passenger_ids),
        }
        self._quotes[quote["quote_id"]] = quote
        return quote

    @tool(
        "Quote moving a booking to another flight of its route, same cabin: the change fee plus any higher "
        "fare. A quote is needed to hold the new seat."
    )
    def quote_change(self, args: QuoteChangeArgs) -> dict[str, Any]:
        self._service()
        booking, new, cost = self._change_terms(args.pnr, args.new_flight_id)
        quote = {
            "quote_id": self._new_id("Q"),
            "kind": "change",
            "pnr": booking.pnr,
            "flight_id": new.id,
            "cabin": booking.cabin,
            "passenger_ids": [booking.passenger_id],
            "price_per_person": cost.price,
            "change_fee": cost.fee,
            "fare_difference": cost.difference,
            "total": cost.fee + cost.difference,
            "payment_method_id": booking.payment_method_id,
        }
        self._quotes[quote["quote_id"]] = quote
        return quote

    @tool(
        f"Hold seats for a quote (one hold per quote). A hold keeps its seats for {HOLD_TURNS} turns and "
        "books nothing: confirm_hold books them; an unconfirmed hold expires and changes nothing."
    )
    def hold_seats(self, args: HoldArgs) -> dict[str, Any]:
        self._service()
        quote = self._quotes.get(args.quote_id)
        if quote is None:
            raise ToolError(f"no open quote {args.quote_id!r}; quote_fare or quote_change first")
        count = len(quote["passenger_ids"])
        if args.seat and count > 1:
            raise ToolError("an exact seat can only be given for one passenger; use seat_preference")
        seats = self._pick_seat(quote["flight_id"], quote["cabin"], args.seat, args.seat_preference, count)
        del self._quotes[args.quote_id]
        aircraft = self.world.flights[quote["flight_id"]]["aircraft"]
        hold = {
            **quote,
            "hold_id": self._new_id("H"),
            "seats": seats,
            "expires_at_turn": self.turn + HOLD_TURNS,
        }
        self._holds[hold["hold_id"]] = hold
        shown = {k: v for k, v in hold.items() if k not in {"quote_id", "expires_at_turn"}}
        return {
            **shown,
            "positions": [SEAT_INFO[aircraft][s][4] for s in seats],
            "expires_after_turns": HOLD_TURNS,
        }

    @tool(
        "Confirm a hold: books its seats (or moves its booking) and charges the payment method, at the "
        "quoted price if it still holds."
    )
    def confirm_hold(self, args: ConfirmArgs) -> dict[str, Any]:
        with self._one_call():
            hold = self._live_holds().get(args.hold_id)
            if hold is None:
                raise ToolError(
                    f"no live hold {args.hold_id!r} (holds expire after {HOLD_TURNS} turns); "
                    "nothing was booked"
                )
            if self._fare(hold["flight_id"], hold["cabin"]).price != hold["price_per_person"]:
                raise ToolError("the fare changed since the quote; nothing was booked. Quote again.")
            if hold["kind"] == "change":
                if args.payment_method_id not in (None, hold["payment_method_id"]):
                    raise ToolError(
                        "a change is charged to the booking's own payment method "
                        f"({hold['payment_method_id']})"
                    )
                payer = hold["payment_method_id"]
            elif args.payment_method_id is None:
                raise ToolError("payment_method_id is required to confirm a new booking")
            else:
                payer = args.payment_method_id
                self._check_payer(payer, hold["passenger_ids"])
            self._confirming = hold
            try:
                if hold["kind"] == "change":
                    result = self.change_booking(ChangeArgs(pnr=hold["pnr"], new_flight_id=hold["flight_id"]))
                else:
                    result = self.book_flight(
                        BookArgs(
                            flight_id=hold["flight_id"],
                            cabin=hold["cabin"],
                            passenger_ids=hold["passenger_ids"],
                            payment_method_id=payer,
                        )
                    )
            finally:
                self._confirming = None
            del self._holds[args.hold_id]
            return result
