"""Playing Flights-v0 with the deterministic customer: ask for the request, then play as if it had
been given whole.

`AskFirst` wraps any policy written for the whole request (the oracle, the hack suite's policies):
it reads the customer's opening message, asks for every fact the request can hold (each in its own
message, or all in one), reads the replies, writes the request as the whole-request text would have
said it (`text.describe`), and hands the wrapped policy that first observation; from then on it
passes everything through. So `AskFirst(OraclePolicy())` solves every task through questions, and a
hack wrapped in it gets exactly the information the customer gives.
"""

from __future__ import annotations

import re
from typing import Any

from agentrl.flights.text import describe

REQUEST_HEADING = "# Customer request\n"
# one question per fact, each matched by exactly that fact's keyword rule (see `customer.py`)
QUESTIONS = {
    "booking": "What is your booking code?",
    "date": "On what date do you travel?",
    "cabin": "Which cabin class?",
    "passengers": "Who are the passengers?",
    "payment": "How would you like to pay?",
    "time": "What departure time suits you?",
    "budget": "What is your budget?",
    "seat": "Which seat would you like?",
}
ALL_AT_ONCE = ("Before I start: what is your booking code (if any), your travel date and cabin class, who "
               "travels, how you pay, your departure time, your budget and your seat?")
_ROUTE = re.compile(r"\(([A-Z]{3})\) to [^()]+ \(([A-Z]{3})\)")
_CHOOSE = re.compile(r"the (cheapest|earliest) flight")
_READ = {
    "pnr": re.compile(r"My booking is ([A-Z0-9]{6})\."),
    "date": re.compile(r"I travel on (\d{4}-\d{2}-\d{2})\."),
    "cabin": re.compile(r"\b(Economy|Business) class\."),
    "payment_method_id": re.compile(r"Charge payment method (pm_\w+)\."),
    "window": re.compile(r"Departing between (\d\d:\d\d) and (\d\d:\d\d)\."),
    "after": re.compile(r"Departing no earlier than (\d\d:\d\d)\."),
    "max_price": re.compile(r"At most (\d+) CNY per person\."),
    "seat_position": re.compile(r"I want an? (window|aisle) seat\."),
}
_PASSENGER = re.compile(r"(?:are |, |me: )([^,:()]+?) \(passenger (P\d+)\)")


def read_request(opening: str, replies: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The structured request (as `tasks.Task.request` holds it) and the passengers' names, read
    from the customer's opening message and replies."""
    action = ("change" if "move my booking" in opening
              else "cancel_and_book" if "cancel my booking" in opening else "book")
    route = _ROUTE.search(opening)
    choose = _CHOOSE.search(opening)
    found = {key: pattern.search(replies) for key, pattern in _READ.items()}
    after, before = found["window"].groups() if found["window"] else ("00:00", "23:59")
    if found["after"]:
        after = found["after"].group(1)
    people = _PASSENGER.findall(replies)
    request = {
        "action": action,
        "passengers": [pid for _name, pid in people],
        "payment_method_id": found["payment_method_id"] and found["payment_method_id"].group(1),
        "origin": route.group(1) if route else None,
        "destination": route.group(2) if route else None,
        "date": found["date"] and found["date"].group(1),
        "cabin": found["cabin"].group(1).lower() if found["cabin"] else "economy",
        "depart_after": after,
        "depart_before": before,
        "max_price": int(found["max_price"].group(1)) if found["max_price"] else None,
        "seat_position": found["seat_position"] and found["seat_position"].group(1),
        "choose": "earliest" if action == "change" else (choose.group(1) if choose else "cheapest"),
        "pnr": found["pnr"] and found["pnr"].group(1),
    }
    return request, {pid: name for name, pid in people}


class AskFirst:
    """Ask the customer for the whole request, then let `policy` play as if it had been given whole.

    `one_by_one`: one question per fact (seven or eight turns) instead of one question for all,
    `question` (by default `ALL_AT_ONCE`, which names every fact)."""

    def __init__(self, policy: Any, one_by_one: bool = False, question: str = ALL_AT_ONCE) -> None:
        self.policy = policy
        self.one_by_one = one_by_one
        self.question = question
        self.first: str | None = None
        self.first_info: dict[str, Any] = {}
        self.pending: list[str] = []
        self.replies: list[str] = []
        if hasattr(policy, "feedback"):
            self.feedback = self._feedback

    def _feedback(self, reward: float) -> None:
        if not self.pending and self.first is None:
            self.policy.feedback(reward)

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        if REQUEST_HEADING in observation:
            self.first, self.first_info, self.replies = observation, info, []
            opening = self._opening()
            facts = [f for f in QUESTIONS if f != "booking" or "my booking" in opening]
            self.pending = [QUESTIONS[f] for f in facts] if self.one_by_one else [self.question]
            return self.pending.pop(0)
        if self.first is None:
            return self.policy(observation, info)
        self.replies.append(observation)
        if self.pending:
            return self.pending.pop(0)
        whole, self.first = self._whole(), None
        return self.policy(whole, self.first_info)  # the reset's info, as the first observation's

    def _opening(self) -> str:
        assert self.first is not None, "no first observation yet"
        return self.first.split(REQUEST_HEADING, 1)[1].split("\n\n", 1)[0]

    def _whole(self) -> str:
        """The first observation with the customer's opening replaced by the whole request; as it
        came (the opening only) when the replies did not tell who travels and when."""
        request, names = read_request(self._opening(), " ".join(self.replies))
        assert self.first is not None
        if not request["passengers"] or not request["date"]:
            return self.first
        head, rest = self.first.split(REQUEST_HEADING, 1)
        tools = rest.split("\n\n# Tools", 1)[1]
        return f"{head}{REQUEST_HEADING}{describe(request, names)}\n\n# Tools{tools}"
