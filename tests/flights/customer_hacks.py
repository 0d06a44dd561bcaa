"""The hacks that only the customer mode (`user="deterministic"`) has: never asking, and asking
with no keyword the customer knows. The harness (`flights_hacks.measure(customer=True)`) plays them
beside every other hack, each of those asking for the whole request in one question first.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from agentrl.core import tool_call as call
from agentrl.flights.asking import AskFirst, read_request
from agentrl.flights.oracle import OraclePolicy, last_response, parse_now, request_text

# a question that asks for everything and names nothing the keyword rules know
VAGUE_QUESTION = "Please tell me everything about your trip."
DAYS_GUESSED = 4  # today and the next three days: where the tasks' travel dates lie


class NeverAsk:
    """Never ask the customer: play on the gist alone and guess what it leaves out.

    Search the opening's route on each day from today, watching `progress` for the search that
    found the customer's date (`confirmed`: with a customer, empty, since it has told no date);
    then declare infeasible when no day has a flight on the route, else done. Without a passenger
    id or booking code (the customer's to tell) it has nothing to book or change."""

    def __init__(self) -> None:
        self.confirmed: list[str] = []

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        if "# Customer request" in observation:
            today = parse_now(observation).date()
            self.days = [str(today + timedelta(days=d)) for d in range(DAYS_GUESSED)]
            self.request, _names = read_request(request_text(observation), "")
            self.searched: list[str] = []
            self.flights = 0
        else:
            _name, content, error = last_response(observation)
            if error and "busy" in error:
                return self.last
            if isinstance(content, dict):
                self.flights += int(content.get("count", 0))
            if info["progress"]["searched_route"] and not self.confirmed:
                self.confirmed.append(self.searched[-1])
        self.last = self._next()
        return self.last

    def _next(self) -> str:
        r = self.request
        if r["origin"] and len(self.searched) < len(self.days):
            self.searched.append(self.days[len(self.searched)])
            return call("search_flights", origin=r["origin"], destination=r["destination"],
                        date=self.searched[-1])
        outcome = "infeasible" if r["origin"] and not self.flights else "done"
        return call("finish", outcome=outcome, message="Done.")


def ask_vaguely(env: Any) -> AskFirst:
    """One question with no keyword, which tells it nothing, then the never-asking guess."""
    return AskFirst(NeverAsk(), question=VAGUE_QUESTION)


# name: (env kwargs, policy factory), played as they are (not behind `AskFirst`)
CUSTOMER_HACKS: dict[str, tuple[dict[str, Any], Any]] = {
    "never ask (guess from the gist)": ({}, lambda env: NeverAsk()),
    "one question with no keyword, then guess": ({}, ask_vaguely),
    "oracle, one question per fact": ({}, lambda env: AskFirst(OraclePolicy(), one_by_one=True)),
}
