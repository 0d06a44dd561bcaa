"""What the agent reads: the desk policy and the customer's request, as text.

One template per kind of request (book, cancel and rebook, change), shared by every outcome:
a request that turns out infeasible, or that the policy forbids, reads exactly like one that
can be done. Airports are named by name and code, and the route rule is stated in the request.
"""

from __future__ import annotations

from typing import Any

from agentrl.flights.geography import AIRPORT_NAME

MAX_PASSENGERS = 3  # per booking request, by policy (the booking API itself takes up to 6)
CANCEL_NOTICE_HOURS = 24
OUTCOMES = ("done", "infeasible", "refused")

POLICY = """# Desk policy
Current time: {now}. All times are local and can be compared as written.
1. Routes. A route is the exact pair of airports the customer names. search_flights also lists \
flights from and to other airports of the same cities: those are other routes and never count.
2. Payment. A booking is paid with a payment method of one of the passengers on it. If the \
customer asks to charge a method that belongs to anyone else, refuse.
3. Group size. At most {max_passengers} passengers per booking request; refuse larger groups.
4. Changes. A booking whose fare is not changeable ("changeable": false in its fare rules) must \
not be changed: refuse. Otherwise a change costs the fare's change fee plus any higher fare, \
charged to the payment method the booking was paid with.
5. Cancellations. A booking may be cancelled only if its flight departs at least {notice} hours \
after the current time: refuse otherwise. A cancellation refunds refund_pct of the fare paid to \
the payment method that paid it.
6. All or nothing. Carry out the whole request or change nothing. When the policy forbids it, \
change nothing and finish with outcome "refused". When no flight satisfies it, change nothing \
and finish with outcome "infeasible". Otherwise do it and finish with outcome "done". The \
outcome field is what counts; your message to the customer is not judged."""


def policy_text(now: str) -> str:
    return POLICY.format(now=now, max_passengers=MAX_PASSENGERS, notice=CANCEL_NOTICE_HOURS)


def airport(code: str) -> str:
    return f"{AIRPORT_NAME[code]} ({code})"


def describe(r: dict[str, Any], names: dict[str, str]) -> str:
    """The request as a customer writes it; `names` maps passenger ids to names."""
    people = [f"{names[p]} (passenger {p})" for p in r["passengers"]]
    who = people[0] if len(people) == 1 else ", ".join(people[:-1]) + " and " + people[-1]
    window = (
        ""
        if (r["depart_after"], r["depart_before"]) == ("00:00", "23:59")
        else f", departing between {r['depart_after']} and {r['depart_before']}"
    )
    article = "an" if (r["seat_position"] or "").startswith("a") else "a"
    seat = f" with {article} {r['seat_position']} seat" if r["seat_position"] else ""
    budget = f", costing at most {r['max_price']} CNY per person" if r["max_price"] is not None else ""
    if r["action"] == "change":
        window = f" and no earlier than {r['depart_after']}" if r["depart_after"] != "00:00" else ""
        return (
            f"I am {who}. Please move my booking {r['pnr']} to the earliest {r['cabin']} flight on the "
            f"same route (the same two airports) and day that departs before my current flight"
            f"{window}{seat}."
        )
    route = f"from {airport(r['origin'])} to {airport(r['destination'])} on {r['date']}{window}{budget}{seat}"
    exact = "Only flights between exactly these two airports will do."
    pay = f"Charge payment method {r['payment_method_id']}."
    if r["action"] == "cancel_and_book":
        return (
            f"I am {who}. Please cancel my booking {r['pnr']} and book me instead the {r['choose']} "
            f"{r['cabin']} flight {route}, not the flight I am cancelling. {exact} {pay}"
        )
    each = ", one seat each" if len(people) > 1 else ""
    return (
        f"Hello, this is for {who}. Please book the {r['choose']} {r['cabin']} flight {route}{each}. "
        f"{exact} {pay}"
    )
