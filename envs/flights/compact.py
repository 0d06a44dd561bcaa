"""Flights-v0's compact observations: the same desk in few tokens, for models with short contexts.

`gym.make("agentrl/Flights-v0", observation="compact")` keeps the tasks, tools, actions and rewards
and changes only what the agent reads: the desk policy as its rules in a line each, the tools as
one-line signatures (from the same argument models, so they never drift from what `validate`
accepts), the request as in the full mode, and tool results trimmed to the fields a task needs,
with search results as one text row per flight under a column header. The first observation is
about a quarter of the full one's tokens (docs/envs/flights.md).

`search_results` reads the flights of a search in either mode, so that every scripted policy
(the oracle, the hack suite's) reads the compact rows through the one parser.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from agentrl.core.tools import Tool
from agentrl.flights.text import CANCEL_NOTICE_HOURS, MAX_PASSENGERS
from agentrl.flights.world import CABINS

OBSERVATIONS = ("full", "compact")
# a search row: `flight_id number origin destination departs economy business`, each fare written
# price/seats_left (the date is the search's, given once; no task asks when a flight arrives)
COLUMNS = "flight_id number origin destination departs economy business (fare: price/seats_left)"

POLICY = """# Desk policy
Current time: {now} (local, as all times).
1. Route: only the exact two airports named, never other airports of the same cities.
2. Pay only with a method of a passenger on the booking; else refuse.
3. More than {max_passengers} passengers: refuse.
4. Fare with changeable false: refuse changes. A change costs its change fee plus any higher \
fare, on the booking's method.
5. Cancel only flights departing {notice}+ hours after now; else refuse. Refund: refund_pct of fare paid.
6. All or nothing. Outcome "refused" if forbidden, "infeasible" if no flight fits (change nothing \
in both), else "done". Only the outcome is judged."""


def compact_policy_text(now: str) -> str:
    return POLICY.format(now=now, max_passengers=MAX_PASSENGERS, notice=CANCEL_NOTICE_HOURS)


def _type_name(annotation: Any) -> str:
    """An argument's type in a signature: nothing for text, `int`, `[str]`, or `a|b` for a choice."""
    if get_origin(annotation) in (Union, types.UnionType):
        return "|".join(n for a in get_args(annotation) if a is not type(None) and (n := _type_name(a)))
    if get_origin(annotation) is Literal:
        return "|".join(str(v) for v in get_args(annotation))
    if get_origin(annotation) is list:
        return f"[{_type_name(get_args(annotation)[0]) or 'str'}]"
    return {int: "int", bool: "bool", float: "number"}.get(annotation, "")


# what a tool's name and arguments leave unsaid, in a few words (other tools: their description's
# first sentence)
NOTES = {
    "search_flights": "any airports of both cities, unsorted",
    "filter_flights": "filters and sorts the last search",
    "get_flight": "fares, fare rules, seats left",
    "check_seats": "free seats by position",
    "get_passenger": "methods, balances, bookings",
    "book_flight": "seat for one passenger only",
    "get_booking": "its flight and fare rules",
    "cancel_booking": "refunds refund_pct",
    "change_booking": "same route and cabin",
    "finish": "ends the episode",
}


def signature(spec: Tool) -> str:
    """One tool in a line: `name(arg:type, optional?:type): what it does` (`NOTES`)."""
    model: type[BaseModel] = spec.arguments
    args = []
    for name, field in model.model_fields.items():
        kind = _type_name(field.annotation)
        args.append(name + ("" if field.is_required() else "?") + (f":{kind}" if kind else ""))
    what = NOTES.get(spec.name) or spec.description.split(". ", 1)[0].split(": ", 1)[0].rstrip(".")
    return f"{spec.name}({', '.join(args)}): {what}"


def signatures(tools: dict[str, Tool]) -> str:
    return "\n".join(signature(spec) for spec in tools.values())


# --- tool results --------------------------------------------------------------------------------
def row(summary: dict[str, Any]) -> str:
    """One flight of a search as a text row under `COLUMNS`."""
    fares = " ".join(f"{summary['fares'][c]['price']}/{summary['fares'][c]['seats_left']}" for c in CABINS)
    s = summary
    return f"{s['flight_id']} {s['number']} {s['origin']} {s['destination']} {s['departs']} {fares}"


def parse_row(text: str, date: str) -> dict[str, Any]:
    """A row back as the full mode's flight summary (less the arrival and aircraft: rows leave them out)."""
    fid, number, origin, destination, departs, *fares = text.split()
    if len(fares) != len(CABINS):
        raise ValueError(f"not a search row: {text!r}")
    prices = [tuple(int(x) for x in fare.split("/")) for fare in fares]
    return {
        "flight_id": int(fid),
        "number": number,
        "origin": origin,
        "destination": destination,
        "date": date,
        "departs": departs,
        "fares": {c: {"price": p, "seats_left": n} for c, (p, n) in zip(CABINS, prices, strict=True)},
    }


def _rows(content: dict[str, Any]) -> dict[str, Any]:
    results = content.pop("results")
    date = results[0]["date"] if results else None
    return {**content, "date": date, "columns": COLUMNS, "rows": [row(s) for s in results]}


def _flight(flight: dict[str, Any]) -> dict[str, Any]:
    """A flight as a booking or a lookup needs it: schedule and fares, no aircraft or carrier."""
    return {k: v for k, v in flight.items() if k not in ("aircraft", "carrier")}


def _booking(content: dict[str, Any]) -> dict[str, Any]:
    flight = {k: v for k, v in content["flight"].items() if k not in ("aircraft", "fares")}
    return {**content, "flight": flight}


def _passenger(content: dict[str, Any]) -> dict[str, Any]:
    # the kind is in each method's id (pm_card_..., pm_wallet_...); the email is never needed
    methods = [{"id": pm["id"], "balance": pm["balance"]} for pm in content["payment_methods"]]
    return {k: v for k, v in content.items() if k != "email"} | {"payment_methods": methods}


def _seats(content: dict[str, Any]) -> dict[str, Any]:
    return {**content, "available": {p: " ".join(seats) for p, seats in content["available"].items()}}


TRIM: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "search_flights": _rows,
    "filter_flights": _rows,
    "results_page": _rows,
    "get_flight": _flight,
    "get_booking": _booking,
    "get_passenger": _passenger,
    "check_seats": _seats,
}


def compact_result(name: str, content: Any) -> Any:
    """A tool's result as the compact mode shows it (unchanged for tools whose answer is short)."""
    trim = TRIM.get(name)
    return trim(dict(content)) if trim is not None and isinstance(content, dict) else content


def search_results(content: dict[str, Any]) -> list[dict[str, Any]]:
    """The flights of a search's (or filter's, or page's) result, in either observation mode."""
    if "rows" in content:
        return [parse_row(text, content["date"]) for text in content["rows"]]
    return list(content["results"])
