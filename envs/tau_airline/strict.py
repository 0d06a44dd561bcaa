"""What `strict_refusals` asks of a refusal, a hand-off and a required output beyond the benchmark.

A refusal task (gold leaves the database unchanged and asks for no output) pays 1 in the benchmark
to any agent that writes nothing. Reading the customer's records first is not enough to tell a
judged refusal from a blanket one: an agent that reads, then refuses everything, is paid on every
refusal task. So under `strict_refusals` a refusal (or a hand-off's summary) must name the rule of
the policy that forbids the request, and only rules that forbid it. The rules that forbid a
request are computed here from the task's request and the database as loaded, by the airline
policy's own conditions; the benchmark's tasks give the request only as the customer's
instruction, so its kinds (cancel, change flights, remove a passenger, add insurance, ask for
compensation) and the reservations it concerns (their ids, else a flight number, else the route's
airport codes, else all the customer's) are read from that text by the patterns below.

A required output is matched as a whole word under `strict_refusals` ("4" is not said by "24",
"4.5" or "$4,000"; "4.0" says it), where the benchmark matches it as a substring.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from datetime import datetime, timedelta
from typing import Any

from agentrl.tau_airline.data import AirlineData, Task
from agentrl.tau_airline.desk import BOOKED_AT

# The policy's rules a refusal can rest on, each with the words that name it in a message. A
# message names a rule when the rule's pattern matches it (case-insensitive).
POLICY_RULES: dict[str, str] = {
    # cancellation: only within 24 hours of booking, after an airline cancellation, in business,
    # or with travel insurance
    "cancellation_window": r"\b24[- ]hours?\b|\b(?:no|without)\s+(?:travel\s+)?insurance\b",
    # insurance refunds a cancellation for health or weather reasons only
    "insurance_reason": r"\bhealth\b|\bweather\b",
    # a reservation with a flown segment cannot be cancelled by the agent
    "flown_segment": (r"\balready\s+(?:been\s+)?(?:flown|used|departed|taken off)\b"
                      r"|\bpartially\s+(?:used|flown)\b"),
    # basic economy flights cannot be modified
    "basic_economy_change": (r"\bbasic economy\b[^.!?\n]*\b(?:modif|chang)\w*"
                             r"|\b(?:modif|chang)\w*[^.!?\n]*\bbasic economy\b"),
    # the number of passengers cannot change
    "passenger_count": r"\bnumber of passengers\b",
    # insurance cannot be added after the booking
    "insurance_after_booking": (r"\badd(?:ed|ing)?\s+(?:travel\s+)?insurance\b"
                                r"|\binsurance\b[^.!?\n]*\bafter\b[^.!?\n]*\bbook"),
    # a certificate only to a silver or gold member, an insured or a business traveller, after a
    # cancelled flight (a delay only with a change or cancellation)
    "compensation": r"\bcompensat\w*|\bcertificates?\b",
}
_NAMES = {rule: re.compile(pattern, re.IGNORECASE) for rule, pattern in POLICY_RULES.items()}
# The kinds of request a customer's instruction makes, by the words that ask for them.
_REQUESTS = {
    # the verb only: "was canceled" and "the cancellation" are what a complaint says
    "cancel": re.compile(r"\bcancel(?:l?ing)?\b", re.IGNORECASE),
    # flights (a cabin change, "upgrade", is allowed on every reservation and is not one)
    "change": re.compile(r"\b(?:change|push back|move|nonstop)\b", re.IGNORECASE),
    "passengers": re.compile(r"\bremove (?:a )?passengers?\b|\bnumber of passengers\b", re.IGNORECASE),
    "add_insurance": re.compile(r"\badd\w*\s+(?:travel\s+)?insurance\b|\binsurance\s+added\b", re.IGNORECASE),
    "compensation": re.compile(r"\bcompensat\w*|\bvoucher\b|\bcertificate\b", re.IGNORECASE),
}
_RESERVATION_ID = re.compile(r"\b[A-Z0-9]{6}\b")
_FLIGHT_NUMBER = re.compile(r"\b[A-Z]{3}\d{3}\b")
_AIRPORT = re.compile(r"\b[A-Z]{3}\b")
FLOWN = frozenset({"flying", "landed"})
NOW = datetime.fromisoformat(BOOKED_AT)


def named_rules(texts: Iterable[str]) -> frozenset[str]:
    """The policy rules the texts name."""
    return frozenset(rule for rule, pattern in _NAMES.items() if any(pattern.search(t) for t in texts))


def said_whole(output: str, messages: Iterable[str]) -> bool:
    """Whether a message says the output as a whole word (commas dropped, case ignored), a
    trailing ".0" allowed: "4" is said by "4 bags" and "4.0", not by "24", "4.5" or "ref4"."""
    pattern = re.compile(rf"(?<![\w.]){re.escape(output.lower().replace(',', ''))}(?:\.0+)?(?![\w]|\.\d)")
    return any(pattern.search(m.lower().replace(",", "")) for m in messages)


def requested(task: Task) -> frozenset[str]:
    """The kinds of request the task's instruction makes."""
    return frozenset(kind for kind, pattern in _REQUESTS.items() if pattern.search(task.instruction))


def concerned(data: AirlineData, task: Task) -> list[dict[str, Any]]:
    """The customer's reservations the request is about: those the instruction names by id; else
    those the gold looks up; else those holding a flight the instruction names; else those whose
    route has the most of the airport codes it names; else all the customer's."""
    own = {r: data.reservations[r] for r in data.users.get(task.user_id, {}).get("reservations", ())
           if r in data.reservations}
    text = task.instruction
    by_id = [own[r] for r in _RESERVATION_ID.findall(text) if r in own]
    looked_up = [own[a.kwargs.get("reservation_id")] for a in task.actions
                 if a.name == "get_reservation_details" and a.kwargs.get("reservation_id") in own]
    if by_id or looked_up:
        return by_id or looked_up
    numbers = set(_FLIGHT_NUMBER.findall(text))
    by_flight = [r for r in own.values() if numbers & {f["flight_number"] for f in r["flights"]}]
    if by_flight:
        return by_flight
    codes = set(_AIRPORT.findall(text))
    overlap = {rid: len(codes & {r["origin"], r["destination"]}) for rid, r in own.items()}
    best = max(overlap.values(), default=0)
    return [own[rid] for rid, n in overlap.items() if n == best] if best else list(own.values())


def _statuses(data: AirlineData, reservation: dict[str, Any]) -> list[str]:
    flights = data.flights
    return [flights.get(f["flight_number"], {}).get("dates", {}).get(f["date"], {}).get("status", "")
            for f in reservation["flights"]]


def _cancellation(data: AirlineData, reservation: dict[str, Any]) -> set[str]:
    statuses = _statuses(data, reservation)
    rules = {"flown_segment"} if FLOWN & set(statuses) else set()
    booked = datetime.fromisoformat(reservation["created_at"])
    recent = NOW - booked <= timedelta(hours=24)
    if not (recent or "cancelled" in statuses or reservation["cabin"] == "business"):
        rules.add("insurance_reason" if reservation.get("insurance") == "yes" else "cancellation_window")
    return rules


def _compensation(data: AirlineData, task: Task, reservations: list[dict[str, Any]]) -> set[str]:
    member = data.users.get(task.user_id, {}).get("membership") in ("silver", "gold")
    for r in reservations:
        entitled = member or r.get("insurance") == "yes" or r["cabin"] == "business"
        if entitled and "cancelled" in _statuses(data, r):
            return set()
    return {"compensation"}


def forbidding_rules(data: AirlineData, task: Task) -> frozenset[str]:
    """The policy rules that forbid the task's request, applied to the database as loaded (a
    refusal task leaves it so): empty where no rule does (the customer declines a price, or the
    gold refuses what the policy allows). Computed once per task."""
    key = ("forbidding", task.index)
    with data.lock:
        if key in data.cache:
            return data.cache[key]
    kinds = requested(task)
    reservations = concerned(data, task)
    rules: set[str] = set()
    if "cancel" in kinds:
        for r in reservations:
            rules |= _cancellation(data, r)
    if "change" in kinds and any(r["cabin"] == "basic_economy" for r in reservations):
        rules.add("basic_economy_change")
    if "passengers" in kinds:
        rules.add("passenger_count")
    if "add_insurance" in kinds:
        rules.add("insurance_after_booking")
    if "compensation" in kinds:
        rules |= _compensation(data, task, reservations)
    result = frozenset(rules)
    with data.lock:
        data.cache[key] = result
    return result


def rules_ok(named: frozenset[str], forbidding: frozenset[str]) -> bool:
    """A refusal names the rule that forbids the request, and no rule that does not; where no rule
    forbids it, it names none."""
    return named <= forbidding and bool(named) == bool(forbidding)


def blanket_refusal_penalty(data: AirlineData, refusal_tasks: Collection[Task]) -> float:
    """The least `wrong_refusal_penalty` under which a blanket refusal earns no more than doing
    nothing (0 under `strict_refusals`) over the data's tasks. A blanket policy refuses, or hands
    off, every request, with a reason chosen by the request's kinds alone (never by the database);
    the best one is paid, for each set of kinds, on the most refusal tasks one reason (a rule, or
    none) fits, refusing or handing off. It pays the penalty on every other task, which it fails."""
    groups: dict[tuple[frozenset[str], bool], list[frozenset[str]]] = {}
    for task in refusal_tasks:
        handoff = any(a.name == "transfer_to_human_agents" for a in task.actions)
        groups.setdefault((requested(task), handoff), []).append(forbidding_rules(data, task))
    best: dict[frozenset[str], int] = {}
    for (kinds, _), sets in groups.items():
        fits = max(sum(not f for f in sets), *(sum(rule in f for f in sets) for rule in POLICY_RULES))
        best[kinds] = max(best.get(kinds, 0), fits)
    others = len(data.tasks) - len(refusal_tasks)
    return sum(best.values()) / others if others else 0.0
