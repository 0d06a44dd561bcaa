"""Flights-v0's deterministic customer: a request given piece by piece, only when asked.

With `user="deterministic"` the first observation carries only the customer's opening message:
what they want done (book, cancel and rebook, or move a booking), on which route, and which flight
("the cheapest", "the earliest"). Everything else comes only when the agent asks for it: a message
with no tool call goes to the customer, whose reply is the next observation. The customer finds
what was asked for by keyword rules, each a set of word stems matched at the start of a word,
case-insensitively, anywhere in the message (`RULES`):

| fact | stems | reply |
|---|---|---|
| booking | booking, reservation, pnr, confirmation, reference | the booking code (or: none) |
| date | date, day, when | the travel date |
| cabin | cabin, class, economy, business | the cabin |
| passengers | passenger, traveler, traveller, who (whole word), name, people, person, how many | names, ids |
| payment | pay, card, charge, method, bill | the payment method (or: the booking's own) |
| time | time, depart, leav, hour, morning, afternoon, evening | the departure window (or: any time) |
| budget | budget, price, cost, spend, afford, max | the most per person (or: no limit) |
| seat | seat, window, aisle | the seat position (or: no preference) |
| constraints | constraint, requirement, preference, restriction | time, budget and seat together |

A message that matches several facts gets them all, one sentence each, in the order of the table; a
message that matches none gets `UNKNOWN_REPLY`. The replies depend on the task and the message only:
the same question gets the same answer at any turn, and the same seed gives the same conversation.
The customer's state (the turns so far) is plain data, so a fork deep-copies it.

With `user="llm"` a chat model plays the same customer (`LLMCustomer`): the same opening message,
then the model answers each question from the whole request, told in its system message to give
only what was asked (`LLM_GUIDELINES`), through the OpenAI-compatible client TauAirline-v0's
customer uses (`agentrl.core.users.LLMUser`).

Either way, `progress` (and the shaped reward built on it) counts a subgoal only once the customer
has told the value that identifies it (`identifying`): a search of the right route on a guessed
date, or a look-up of a guessed passenger, must not confirm the guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agentrl.core.results import StepResult
from agentrl.core.trajectory import call_record
from agentrl.core.users import LLMUser
from agentrl.flights.text import airport

USER_KINDS = (None, "deterministic", "llm")
UNKNOWN_REPLY = "Sorry, I don't know what you mean. What do you need to know from me?"
EMPTY_REPLY = "Empty message: write your question to the customer, or tool calls."
# the keyword rules, in the order answers are given (see the module's docstring)
RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("booking", ("booking", "reservation", "pnr", "confirmation", "reference")),
    ("date", ("date", "day", "when")),
    ("cabin", ("cabin", "class", "economy", "business")),
    ("passengers", ("passenger", "traveler", "traveller", r"who\b", "name", "people", "person", "how many")),
    ("payment", ("pay", "card", "charge", "method", "bill")),
    ("time", ("time", "depart", "leav", "hour", "morning", "afternoon", "evening")),
    ("budget", ("budget", "price", "cost", "spend", "afford", "max")),
    ("seat", ("seat", "window", "aisle")),
    ("constraints", ("constraint", "requirement", "preference", "restriction")),
)
CONSTRAINTS = ("time", "budget", "seat")
_PATTERNS = {fact: re.compile(r"\b(?:" + "|".join(stems) + ")", re.IGNORECASE) for fact, stems in RULES}


def asked(message: str) -> list[str]:
    """The facts a message asks for, in answer order (constraints expanded, each fact once)."""
    facts: list[str] = []
    for fact, _stems in RULES:
        if _PATTERNS[fact].search(message):
            facts += list(CONSTRAINTS) if fact == "constraints" else [fact]
    return [f for i, f in enumerate(facts) if f not in facts[:i]]


def opening(request: dict[str, Any]) -> str:
    """The first message: the goal and the route, nothing else."""
    if request["action"] == "change":
        return ("Hello, I would like to move my booking to the earliest flight on the same route (the same "
                "two airports) and day that departs before my current flight.")
    route = f"from {airport(request['origin'])} to {airport(request['destination'])}"
    exact = "Only flights between exactly these two airports will do."
    if request["action"] == "cancel_and_book":
        return (f"Hello, I would like to cancel my booking and book instead the {request['choose']} flight "
                f"{route}, not the flight I am cancelling. {exact}")
    return f"Hello, I would like to book the {request['choose']} flight {route}. {exact}"


def answers(request: dict[str, Any], names: dict[str, str]) -> dict[str, str]:
    """The customer's answer to each fact of the request."""
    r = request
    people = [f"{names[p]} (passenger {p})" for p in r["passengers"]]
    change = r["action"] == "change"
    if change:
        window = (f"Departing no earlier than {r['depart_after']}." if r["depart_after"] != "00:00"
                  else "Any time before my current flight is fine.")
    elif (r["depart_after"], r["depart_before"]) == ("00:00", "23:59"):
        window = "Any departure time is fine."
    else:
        window = f"Departing between {r['depart_after']} and {r['depart_before']}."
    return {
        "booking": f"My booking is {r['pnr']}." if r["pnr"] else "I have no booking yet; this is a new one.",
        "date": f"I travel on {r['date']}.",
        "cabin": f"{r['cabin'].capitalize()} class.",
        "passengers": ("The passengers are " + ", ".join(people) + "." if len(people) > 1
                       else f"Just me: {people[0]}."),
        "payment": ("Charge the payment method the booking was paid with." if change
                    else f"Charge payment method {r['payment_method_id']}."),
        "time": window,
        "budget": (f"At most {r['max_price']} CNY per person." if r["max_price"] is not None
                   else "I have no budget limit."),
        "seat": (f"I want {'an' if r['seat_position'].startswith('a') else 'a'} {r['seat_position']} seat."
                 if r["seat_position"] else "I have no seat preference."),
    }


def identifying(request: dict[str, Any], goal: str) -> str:
    """The withheld value a subgoal (`env.GOALS`) confirms when it is reached: the booking code or
    the first passenger's id for the look-up; the travel date for the route's search (for a move,
    the booking code, whose booking gives the route and date)."""
    if goal == "looked_up_customer":
        return request["pnr"] or request["passengers"][0]
    if goal == "searched_route":
        return request["pnr"] if request["action"] == "change" else request["date"]
    raise ValueError(f"unknown subgoal {goal!r}")


@dataclass
class Customer:
    """What every customer kind shares: the opening, the turn as a step's result, what was told.
    A kind implements `reply` (which appends its turn to `turns`) and `settings`."""

    request: dict[str, Any]
    names: dict[str, str]
    turns: list[dict[str, Any]] = field(default_factory=list)  # {"message", "reply", ...} per turn

    def opening(self) -> str:
        return opening(self.request)

    def first_message(self) -> str:
        """The opening as the first observation's request, with how to ask for the rest."""
        return (f"{self.opening()}\n\n(The customer tells you more when asked: a message with no tool call "
                "goes to the customer, and the reply is the next message.)")

    def turn(self, action: str, step_calls: list[dict[str, Any]], reward: float,
             info: dict[str, Any]) -> StepResult:
        """An action with no tool call: the customer's reply as the step's result, recorded as a
        `respond` call in `step_calls` (an empty message reaches no one)."""
        message = action.strip()
        reply = self.reply(message) if message else EMPTY_REPLY
        if message:
            step_calls.append(call_record("respond", {"content": message}, True, reply))
        return StepResult(reply, reward, False, False,
                          {"calls": [], "invalid_calls": 0, "source": "customer", **info})

    def told(self, value: str) -> bool:
        """Whether a reply so far holds `value` verbatim."""
        return any(value in turn["reply"] for turn in self.turns)

    def reply(self, message: str) -> str:
        raise NotImplementedError

    def settings(self) -> dict[str, Any]:
        raise NotImplementedError


@dataclass
class DeterministicCustomer(Customer):
    """A customer who answers from the task's structured request by keyword rules (see the module).
    Each turn also records the facts the message asked for."""

    def reply(self, message: str) -> str:
        facts = asked(message)
        known = answers(self.request, self.names)
        reply = " ".join(known[f] for f in facts) if facts else UNKNOWN_REPLY
        self.turns.append({"message": message, "facts": facts, "reply": reply})
        return reply

    def settings(self) -> dict[str, Any]:
        return {"kind": "deterministic", "rules": [fact for fact, _stems in RULES]}


LLM_GUIDELINES = """\
You play a customer writing to an airline's customer service agent. You have already sent your first
message; your whole request is the instruction below.
- Answer only what the agent's last message asks, in one or two short sentences.
- Never give a detail the agent did not ask for: not an id, a code, a date, a time, an amount or a seat.
- Give ids, codes, dates, times and amounts exactly as the instruction writes them.
- Never invent facts the instruction does not give: say you have no preference, or that you do not know."""
GREETING = "Hi! How can I help you today?"
FACTS_HEADING = "What you can tell when asked, one fact a line:\n"


@dataclass
class LLMCustomer(Customer):
    """A chat model playing the customer (`user="llm"`): the rule customer's opening, then the
    model's replies. The model's system message is `guidelines`, the whole request (`text`) and
    each fact as the rule customer would tell it (`FACTS_HEADING`, one `- fact: reply` line each:
    the request's text leaves out some, such as a move's date); it sees the desk's greeting, its
    own opening, then the agent's messages as the other party's."""

    text: str = ""
    user: LLMUser | None = None

    def __post_init__(self) -> None:
        assert self.user is not None, "an LLMCustomer needs its LLMUser"
        if not self.user.chat:  # a fork's copy keeps its conversation
            self.user.chat = [
                {"role": "system", "content": f"{self.user.guidelines}\n\nInstruction: {self.text}\n\n"
                 + FACTS_HEADING + "".join(f"- {fact}: {reply}\n" for fact, reply in self.facts().items())},
                {"role": "user", "content": GREETING},
                {"role": "assistant", "content": self.opening()},
            ]

    def facts(self) -> dict[str, str]:
        return answers(self.request, self.names)

    def reply(self, message: str) -> str:
        assert self.user is not None
        reply = self.user.reply(message)
        self.turns.append({"message": message, "reply": reply})
        return reply

    def settings(self) -> dict[str, Any]:
        assert self.user is not None
        return self.user.settings()


def make_customer(kind: str, request: dict[str, Any], names: dict[str, str], text: str,
                  model: dict[str, Any]) -> Customer:
    """A fresh customer of `kind` ("deterministic" or "llm") for one episode's request; `model`
    holds the chat model's `LLMUser` settings (base_url, model, temperature, seed, api_key)."""
    if kind == "llm":
        return LLMCustomer(request, names, text=text, user=LLMUser(guidelines=LLM_GUIDELINES, **model))
    return DeterministicCustomer(request, names)
