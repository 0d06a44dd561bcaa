"""Scripted policies for Flights-v0: an oracle, a random agent and a do-nothing agent.

Every policy is a callable `(observation, info) -> action text` that sees exactly what a remote
client sees: the observation text and the info dict (the reset info carries `info["task"]`, the
structured request). None of them touches the env object, so they run unchanged over HTTP.
The oracle solves tasks the way a careful agent would: look up, search, compare, check seats,
act, and re-check when the world moved (busy service, fare change, seat taken).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

_RESPONSE = re.compile(r"<tool_response>\s*(.*?)\s*</tool_response>", re.DOTALL)


def call(name: str, **arguments: Any) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def last_response(observation: str) -> tuple[str | None, Any, str | None]:
    """(tool name, content, error) of the last tool response in an observation."""
    found = _RESPONSE.findall(observation)
    if not found:
        return None, None, None
    try:
        payload = json.loads(found[-1])
    except json.JSONDecodeError:
        return None, None, "unreadable response"
    return payload.get("name"), payload.get("content"), payload.get("error")


class OraclePolicy:
    """Solves every Flights-v0 task from the request in `info["task"]` and the tools' answers."""

    def __init__(self) -> None:
        self.task: dict[str, Any] = {}

    def _start(self, task: dict[str, Any]) -> None:
        self.task = task
        self.booking: dict[str, Any] | None = None
        self.phase = "lookup" if task["pnr"] else "search"
        self.candidates: list[dict[str, Any]] = []
        self.chosen: dict[str, Any] | None = None
        self.cancelled = False
        self.last_action = ""

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        if "task" in info:
            self._start(info["task"])
            return self._do(self._next())
        name, content, error = last_response(observation)
        if error:
            if "busy" in error:
                return self.last_action
            if "fares" in error or "taken" in error or "left" in error:
                self.phase = "search"
                return self._do(self._next())
            return self._do(call("finish", message=f"I could not complete the request: {error}"))
        self._absorb(name, content)
        return self._do(self._next())

    def _do(self, action: str) -> str:
        self.last_action = action
        return action

    def _absorb(self, name: str | None, content: Any) -> None:
        task = self.task
        if name == "get_booking":
            self.booking = content
            self.phase = "search"
        elif name == "search_flights":
            self.candidates = self._rank(content["results"])
            self.phase = "seats" if task["seat_position"] else "act"
            self.chosen = None if task["seat_position"] else (self.candidates[0] if self.candidates else None)
        elif name == "check_seats":
            if content["counts"].get(task["seat_position"], 0) > 0:
                self.chosen = self.candidates[0]
                self.phase = "act"
            else:
                self.candidates.pop(0)
        elif name == "cancel_booking":
            self.cancelled = True
        elif name in {"book_flight", "change_booking"}:
            self.phase = "done"

    def _rank(self, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        task, booking = self.task, self.booking
        origin, destination = task["origin"], task["destination"]
        before = task["depart_before"]
        if task["action"] == "change":
            before = min(before, booking["flight"]["departs"])
        keep = []
        for r in results:
            fare = r["fares"][task["cabin"]]
            if (r["origin"], r["destination"], r["date"]) != (origin, destination, task["date"]):
                continue
            if not task["depart_after"] <= r["departs"] <= before:
                continue
            if task["action"] == "change" and r["departs"] >= booking["flight"]["departs"]:
                continue
            if booking and r["flight_id"] == booking["flight"]["flight_id"]:
                continue
            if task["flight_number"] and r["number"] != task["flight_number"]:
                continue
            if task["max_price"] is not None and fare["price"] > task["max_price"]:
                continue
            if fare["seats_left"] < len(task["passengers"]):
                continue
            keep.append(r)
        if task["choose"] == "earliest":
            return sorted(keep, key=lambda r: r["departs"])
        return sorted(keep, key=lambda r: (r["fares"][task["cabin"]]["price"], r["departs"]))

    def _next(self) -> str:
        task = self.task
        if self.phase == "lookup":
            return call("get_booking", pnr=task["pnr"])
        if self.phase == "search":
            return call(
                "search_flights", origin=task["origin"], destination=task["destination"], date=task["date"]
            )
        if self.phase == "seats" and self.candidates:
            return call(
                "check_seats",
                flight_id=self.candidates[0]["flight_id"],
                cabin=task["cabin"],
                position=task["seat_position"],
            )
        if self.phase == "done":
            return call("finish", message="All done: your request has been completed.")
        if self.chosen is None:
            return call(
                "finish", message="Sorry, no flight satisfies your request, so I did not book anything."
            )
        if task["action"] == "cancel_and_book" and not self.cancelled:
            return call("cancel_booking", pnr=task["pnr"])
        seat = {"seat_preference": task["seat_position"]} if task["seat_position"] else {}
        if task["action"] == "change":
            return call("change_booking", pnr=task["pnr"], new_flight_id=self.chosen["flight_id"], **seat)
        return call(
            "book_flight",
            flight_id=self.chosen["flight_id"],
            cabin=task["cabin"],
            passenger_ids=task["passengers"],
            payment_method_id=task["payment_method_id"],
            **seat,
        )


class RandomPolicy:
    """Plausible but aimless tool calls: a floor for learning curves."""

    AIRPORTS = ("PEK", "PKX", "SHA", "PVG", "CAN", "SZX", "CTU", "HGH", "HKG")

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.date = "2026-03-02"

    def _pick(self, items: tuple[Any, ...] | list[Any]) -> Any:
        return items[int(self.rng.integers(len(items)))]

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        if "task" in info:
            self.date = info["task"]["date"]
        flight = int(self.rng.integers(1, 120))
        cabin = self._pick(("economy", "business"))
        passenger = f"P{int(self.rng.integers(1001, 1025))}"
        choices = [
            call(
                "search_flights",
                origin=self._pick(self.AIRPORTS),
                destination=self._pick(self.AIRPORTS),
                date=self.date,
            ),
            call("filter_flights", sort_by=self._pick(("price", "departure"))),
            call("get_flight", flight_id=flight),
            call("check_seats", flight_id=flight, cabin=cabin),
            call("get_passenger", passenger_id=passenger),
            call(
                "book_flight",
                flight_id=flight,
                cabin=cabin,
                passenger_ids=[passenger],
                payment_method_id=f"pm_wallet_{int(self.rng.integers(1, 25)):02d}",
            ),
            call("get_booking", pnr="ABC123"),
            call("finish", message=self._pick(("Done.", "Booked it.", "There is no such flight."))),
            "I am not sure what to do.",
        ]
        return self._pick(choices)


def do_nothing_policy(observation: str, info: dict[str, Any]) -> str:
    """Ends at once without acting: must score 0 on every task."""
    return call("finish", message="Done.")


# --- SFT data -------------------------------------------------------------------------------
def to_chat(transcript: dict[str, Any], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """One episode as OpenAI chat messages with structured tool_calls (for SFT warm-up)."""
    from agentrl.core import parse_tool_calls

    messages: list[dict[str, Any]] = [{"role": "user", "content": transcript["task_text"]}]
    for n, step in enumerate(transcript["steps"]):
        calls = [c for c in parse_tool_calls(step["action"]) if hasattr(c, "name")]
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
        for cid, c, body in zip(ids, calls, _RESPONSE.findall(step["observation"]), strict=False):
            messages.append({"role": "tool", "tool_call_id": cid, "name": c.name, "content": body})
    return {"messages": messages, "tools": tools, "reward": transcript["reward"]}


def export_oracle_jsonl(
    path: str | Path,
    n_episodes: int,
    *,
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    only_successes: bool = True,
) -> int:
    """Play the oracle on seeds seed..seed+n-1 and write chat JSONL; returns lines written."""
    import gymnasium as gym

    import agentrl  # noqa: F401  (registers the ids)
    from agentrl.demo import play_episode

    env = gym.make("agentrl/Flights-v0", **(env_kwargs or {})).unwrapped
    written = 0
    with Path(path).open("w", encoding="utf-8") as out:
        for s in range(seed, seed + n_episodes):
            transcript = play_episode(env, OraclePolicy(), s)
            if only_successes and transcript["reward"] < 1.0:
                continue
            out.write(json.dumps(to_chat(transcript, transcript["tools"]), ensure_ascii=False) + "\n")
            written += 1
    env.close()
    return written
