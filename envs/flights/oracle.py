"""Scripted policies for Flights-v0: an oracle, a random agent and a do-nothing agent.

Every policy is a callable `(observation, info) -> action text` that sees exactly what a remote
client sees. The oracle reads the request and the desk policy from the first observation's text
(no privileged info) and the rest from the tools, as a careful agent would: check the policy
(group size, card owner, cancellation notice, changeable fare), search, compare, check seats,
act or declare the request infeasible, and re-check when the world moved (busy service, fare
change, seat taken). That it scores 1.0 shows the text and the tools are enough.

It plays every granularity, read from the tools the first observation lists: at "default" the
steps above; at "fine" the same calls expanded into their fine steps (`fine_plan.FinePlan`); at
"coarse" the same checks, then one macro call in place of search, seat checks and the action.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from agentrl.core.parsing import tool_call
from agentrl.core.tools import TOOL_RESPONSE
from agentrl.flights.calls import granularity_of, last_response
from agentrl.flights.compact import search_results
from agentrl.flights.fine_plan import FinePlan
from agentrl.flights.text import CANCEL_NOTICE_HOURS, MAX_PASSENGERS

MACROS = ("book_best", "rebook", "change_to_best")
_NOW = re.compile(r"Current time: (\d{4}-\d{2}-\d{2} \d{2}:\d{2})")
_FIELDS = {
    "passengers": re.compile(r"\(passenger (P\d+)\)"),
    "pnr": re.compile(r"my booking ([A-Z0-9]{6})\b"),
    "choose": re.compile(r"the (cheapest|earliest) (?:economy|business) flight"),
    "cabin": re.compile(r"the (?:cheapest|earliest) (economy|business) flight"),
    "route": re.compile(r"from [^()]+ \(([A-Z]{3})\) to [^()]+ \(([A-Z]{3})\) on (\d{4}-\d{2}-\d{2})"),
    "window": re.compile(r"departing between (\d\d:\d\d) and (\d\d:\d\d)"),
    "after": re.compile(r"no earlier than (\d\d:\d\d)"),
    "max_price": re.compile(r"costing at most (\d+) CNY"),
    "seat_position": re.compile(r"with an? (window|aisle) seat"),
    "payment_method_id": re.compile(r"Charge payment method (pm_\w+)\."),
}


def request_text(observation: str) -> str:
    """The customer's request: the first observation between its heading and the tool list."""
    return observation.split("# Customer request\n", 1)[-1].split("\n\n# Tools", 1)[0].strip()


def parse_request(observation: str) -> dict[str, Any]:
    """The structured request behind a first observation's text (the inverse of `text.describe`)."""
    text = request_text(observation)
    found = {key: pattern.search(text) for key, pattern in _FIELDS.items()}
    action = "change" if "Please move my booking" in text else "book"
    if "Please cancel my booking" in text:
        action = "cancel_and_book"
    route = found["route"].groups() if found["route"] else (None, None, None)
    after, before = found["window"].groups() if found["window"] else ("00:00", "23:59")
    if found["after"]:
        after = found["after"].group(1)
    return {
        "action": action,
        "passengers": _FIELDS["passengers"].findall(text),
        "payment_method_id": found["payment_method_id"] and found["payment_method_id"].group(1),
        "origin": route[0],
        "destination": route[1],
        "date": route[2],
        "cabin": found["cabin"].group(1) if found["cabin"] else "economy",
        "depart_after": after,
        "depart_before": before,
        "max_price": int(found["max_price"].group(1)) if found["max_price"] else None,
        "seat_position": found["seat_position"] and found["seat_position"].group(1),
        "choose": found["choose"].group(1) if found["choose"] else "cheapest",
        "pnr": found["pnr"] and found["pnr"].group(1),
    }


def parse_now(observation: str) -> datetime:
    found = _NOW.search(observation)
    if found is None:
        raise ValueError("no 'Current time:' in the observation")
    return datetime.fromisoformat(found.group(1))


class OraclePolicy:
    """Solves every Flights-v0 task from the first observation's text and the tools' answers.

    Its judgement is split into small methods (`_refusal`, `_on_route`, `_payment_method`,
    `_finish_without_flight`, `_recover`) so that a variant can change one rule and keep the rest.
    """

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        if "# Customer request" in observation:
            self._start(observation)
            return self._do(self._next())
        name, content, error = last_response(observation)
        if self.plan is not None:
            step = self.plan.feed(name, content, error)
            if isinstance(step, str):
                return step
            self.plan = None
            name, content, error = step
        if error:
            return self._do(self._recover(error))
        self._absorb(name, content)
        return self._do(self._next())

    def _recover(self, error: str) -> str:
        """The next call after a tool error: retry when busy, look again when the world moved."""
        if "busy" in error:
            return self.last_action
        if "fares" in error or "taken" in error or "left" in error:
            self.results, self.chosen = None, None
            return self._next()
        return tool_call("finish", outcome="infeasible", message=f"I could not do it: {error}")

    def _start(self, observation: str) -> None:
        self.granularity = granularity_of(observation)
        self.plan: FinePlan | None = None
        self.request = parse_request(observation)
        self.now = parse_now(observation)
        self.booking: dict[str, Any] | None = None
        self.unchecked = list(self.request["passengers"]) if self.request["payment_method_id"] else []
        self.owner_found = not self.unchecked
        self.results: list[dict[str, Any]] | None = None
        self.candidates: list[dict[str, Any]] = []
        self.chosen: dict[str, Any] | None = None
        self.cancelled = self.acted = False
        self.last_action = ""

    def _do(self, action: str) -> str:
        self.last_action = action
        if self.granularity == "fine" and (plan := FinePlan.start(action)) is not None:
            self.plan = plan
            return plan.first()
        return action

    def _absorb(self, name: str | None, content: Any) -> None:
        if name == "get_booking":
            self.booking = content
            if self.request["action"] == "change":
                flight = content["flight"]
                self.request.update(
                    origin=flight["origin"], destination=flight["destination"], date=flight["date"]
                )
        elif name == "get_passenger":
            self.unchecked.remove(content["passenger_id"])
            owned = {pm["id"] for pm in content["payment_methods"]}
            self.owner_found = self.owner_found or self.request["payment_method_id"] in owned
        elif name == "search_flights":
            self.results = search_results(content)
            self.candidates = self._rank(self.results)
            self.chosen = None if self.request["seat_position"] else (self.candidates or [None])[0]
        elif name == "check_seats":
            if content["counts"].get(self.request["seat_position"], 0) > 0:
                self.chosen = self.candidates[0]
            else:
                self.candidates.pop(0)
        elif name == "cancel_booking":
            self.cancelled = True
        elif name in {"book_flight", "change_booking", *MACROS}:
            self.acted = True

    # --- judgement -------------------------------------------------------------------------
    def _refusal(self) -> str | None:
        """Why the policy forbids the request (None: it does not), once the facts are in."""
        r, booking = self.request, self.booking
        if len(r["passengers"]) > MAX_PASSENGERS:
            return "group size"
        if booking is not None and r["action"] == "cancel_and_book":
            flight = booking["flight"]
            departs = datetime.fromisoformat(f"{flight['date']} {flight['departs']}")
            if departs - self.now < timedelta(hours=CANCEL_NOTICE_HOURS):
                return "cancellation notice"
        if booking is not None and r["action"] == "change" and not booking["fare_rules"]["changeable"]:
            return "fare not changeable"
        if not self.unchecked and not self.owner_found:
            return "payment method of someone else"
        return None

    def _on_route(self, result: dict[str, Any]) -> bool:
        r = self.request
        return (result["origin"], result["destination"], result["date"]) == (
            r["origin"],
            r["destination"],
            r["date"],
        )

    def _rank(self, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        r, booking = self.request, self.booking
        before = r["depart_before"]
        keep = []
        for res in results:
            fare = res["fares"][r["cabin"]]
            if not self._on_route(res) or not r["depart_after"] <= res["departs"] <= before:
                continue
            if booking and res["flight_id"] == booking["flight"]["flight_id"]:
                continue
            if r["action"] == "change":
                assert booking is not None, "a change reads its booking first"
                if res["departs"] >= booking["flight"]["departs"]:
                    continue
            if r["max_price"] is not None and fare["price"] > r["max_price"]:
                continue
            if fare["seats_left"] < len(r["passengers"]):
                continue
            keep.append(res)
        if r["choose"] == "earliest":
            return sorted(keep, key=lambda x: x["departs"])
        return sorted(keep, key=lambda x: (x["fares"][r["cabin"]]["price"], x["departs"]))

    def _payment_method(self) -> str:
        return self.request["payment_method_id"]

    def _finish_without_flight(self) -> str:
        return tool_call(
            "finish", outcome="infeasible", message="No flight satisfies your request; nothing was changed."
        )

    # --- the next call ---------------------------------------------------------------------
    def _next(self) -> str:
        r = self.request
        if self.acted:
            return tool_call("finish", outcome="done", message="All done: your request has been carried out.")
        if r["pnr"] and self.booking is None:
            return tool_call("get_booking", pnr=r["pnr"])
        if self.unchecked and not self.owner_found:
            return tool_call("get_passenger", passenger_id=self.unchecked[0])
        if (reason := self._refusal()) is not None:
            return tool_call(
                "finish", outcome="refused", message=f"Sorry, our policy does not allow this ({reason})."
            )
        if self.granularity == "coarse":
            return self._macro()
        if (choosing := self._choose()) is not None:
            return choosing
        chosen = self.chosen
        assert chosen is not None, "no call left to choose by: a flight is chosen"
        if r["action"] == "cancel_and_book" and not self.cancelled:
            return tool_call("cancel_booking", pnr=r["pnr"])
        seat = {"seat_preference": r["seat_position"]} if r["seat_position"] else {}
        if r["action"] == "change":
            return tool_call("change_booking", pnr=r["pnr"], new_flight_id=chosen["flight_id"], **seat)
        return tool_call(
            "book_flight",
            flight_id=chosen["flight_id"],
            cabin=r["cabin"],
            passenger_ids=r["passengers"],
            payment_method_id=self._payment_method(),
            **seat,
        )

    def _choose(self) -> str | None:
        """The search and seat check that pick the flight, or the finish when none fits; None once
        a flight is chosen."""
        r = self.request
        if self.results is None:
            return tool_call(
                "search_flights", origin=r["origin"], destination=r["destination"], date=r["date"]
            )
        if self.chosen is None and r["seat_position"] and self.candidates:
            flight = self.candidates[0]["flight_id"]
            return tool_call("check_seats", flight_id=flight, cabin=r["cabin"], position=r["seat_position"])
        if self.chosen is None:
            return self._finish_without_flight()
        return None

    def _macro_route(self) -> tuple[str, str]:
        return self.request["origin"], self.request["destination"]

    def _macro(self) -> str:
        """The coarse level's one call: search, pick and act under the request's constraints."""
        r = self.request
        extra = {"seat_preference": r["seat_position"]} if r["seat_position"] else {}
        if r["max_price"] is not None:
            extra["max_price"] = r["max_price"]
        window = {
            "choose": r["choose"],
            "depart_after": r["depart_after"],
            "depart_before": r["depart_before"],
        }
        if r["action"] == "change":  # strictly earlier than the booked flight
            assert self.booking is not None, "a change reads its booking first"
            hours, minutes = map(int, self.booking["flight"]["departs"].split(":"))
            before = hours * 60 + minutes - 1
            if before < 0:
                return self._finish_without_flight()
            window["depart_before"] = min(r["depart_before"], f"{before // 60:02d}:{before % 60:02d}")
            return tool_call("change_to_best", pnr=r["pnr"], **window, **extra)
        origin, destination = self._macro_route()
        where = {"origin": origin, "destination": destination, "date": r["date"], "cabin": r["cabin"]}
        pay = {"payment_method_id": self._payment_method()}
        if r["action"] == "cancel_and_book":
            return tool_call("rebook", pnr=r["pnr"], **where, **pay, **window, **extra)
        return tool_call("book_best", **where, passenger_ids=r["passengers"], **pay, **window, **extra)


class RandomPolicy:
    """Plausible but aimless tool calls on the request's own ids and date: a floor for learning curves.

    Its `finish` says "done" 80% of the time and each other outcome 10%.
    """

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.date, self.passengers, self.methods = "2026-03-02", ["P10001"], ["pm_card_100000"]
        self.airports = ["PEK", "SHA"]

    def _pick(self, items: tuple[Any, ...] | list[Any]) -> Any:
        return items[int(self.rng.integers(len(items)))]

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        if "# Customer request" in observation:
            request = parse_request(observation)
            self.date = request["date"] or self.date
            self.passengers = request["passengers"] or self.passengers
            self.methods = [request["payment_method_id"] or self.methods[0]]
            self.airports = [a for a in (request["origin"], request["destination"]) if a] or self.airports
        flight = int(self.rng.integers(1, 120))
        cabin = self._pick(("economy", "business"))
        passenger = self._pick(self.passengers)
        outcome = ("done", "infeasible", "refused")[int(self.rng.choice(3, p=[0.8, 0.1, 0.1]))]
        choices = [
            tool_call(
                "search_flights",
                origin=self._pick(self.airports),
                destination=self._pick(self.airports),
                date=self.date,
            ),
            tool_call("filter_flights", sort_by=self._pick(("price", "departure"))),
            tool_call("get_flight", flight_id=flight),
            tool_call("check_seats", flight_id=flight, cabin=cabin),
            tool_call("get_passenger", passenger_id=passenger),
            tool_call(
                "book_flight",
                flight_id=flight,
                cabin=cabin,
                passenger_ids=[passenger],
                payment_method_id=self._pick(self.methods),
            ),
            tool_call("get_booking", pnr="ABC123"),
            tool_call(
                "finish",
                outcome=outcome,
                message=self._pick(("Done.", "Booked it.", "There is no such flight.")),
            ),
            "I am not sure what to do.",
        ]
        return self._pick(choices)


def do_nothing_policy(observation: str, info: dict[str, Any]) -> str:
    """Ends at once without acting: must score 0 on every task."""
    return tool_call("finish", outcome="done", message="Done.")


# --- SFT data -------------------------------------------------------------------------------
def to_chat(transcript: dict[str, Any], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """One episode as OpenAI chat messages with structured tool_calls (for SFT warm-up)."""
    from agentrl.core import ParsedCall, parse_tool_calls

    messages: list[dict[str, Any]] = [{"role": "user", "content": transcript["task_text"]}]
    for n, step in enumerate(transcript["steps"]):
        calls = [c for c in parse_tool_calls(step["action"]) if isinstance(c, ParsedCall)]
        ids = [f"call_{n}_{i}" for i in range(len(calls))]
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {
                            "name": c.name,
                            "arguments": json.dumps(c.arguments, ensure_ascii=False),
                        },
                    }
                    for cid, c in zip(ids, calls, strict=True)
                ],
            }
        )
        for cid, c, body in zip(ids, calls, TOOL_RESPONSE.findall(step["observation"]), strict=False):
            messages.append({"role": "tool", "tool_call_id": cid, "name": c.name, "content": body})
    chat = {"messages": messages, "tools": tools, "reward": transcript["reward"]}
    if transcript.get("task"):
        chat["task"] = {k: transcript["task"][k] for k in ("family", "level", "outcome", "reason")}
    return chat


def record_chat(record: dict[str, Any], task: dict[str, Any] | None) -> dict[str, Any]:
    """A trajectory record (`agentrl.trajectory/1`) as `to_chat`'s line: the SFT line is a view of
    the record; `task` is the reset's privileged `info["task"]` (None without it)."""
    steps = record["steps"]
    episode = {
        "task_text": record["observation"],
        "steps": steps,
        "reward": sum(step["reward"] for step in steps),
        "task": task,
    }
    return to_chat(episode, record["tools"])

