"""Default-level calls played through Flights-v0's fine tools, one fine call per step.

A policy written against the default tools (a search that returns every result, `book_flight`,
`change_booking`) plays the fine level through `FinePlan`: each such call becomes its fine steps
(the search and its further pages; quote, hold, confirm), and their answers merge back into the
answer the default tool would have given, so the policy's own judgement is unchanged. The oracle
uses it; `FineAdapter` wraps any other policy (the hack suite plays its hacks so).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentrl.core import ParsedCall, parse_tool_calls, tool_response
from agentrl.core.parsing import tool_call
from agentrl.flights.calls import granularity_of, last_response
from agentrl.flights.compact import search_results

EXPANDED = ("search_flights", "book_flight", "change_booking")
Policy = Callable[[str, dict[str, Any]], str]


class FinePlan:
    """The fine steps of one default call; `feed` each answer, get the next call or the merged answer."""

    def __init__(self, name: str, arguments: dict[str, Any]) -> None:
        self.name, self.arguments = name, arguments
        self.results: list[dict[str, Any]] = []
        self.current = ""

    @classmethod
    def start(cls, action: str) -> FinePlan | None:
        """A plan for an action that is one expandable call; None for anything else."""
        calls = parse_tool_calls(action)
        if len(calls) != 1 or not isinstance(calls[0], ParsedCall) or calls[0].name not in EXPANDED:
            return None
        return cls(calls[0].name, dict(calls[0].arguments))

    def _pick(self, *keys: str) -> dict[str, Any]:
        return {k: self.arguments[k] for k in keys if self.arguments.get(k) is not None}

    def first(self) -> str:
        a = self.arguments
        if self.name == "search_flights":
            self.current = tool_call("search_flights", **a)
        elif self.name == "book_flight":
            self.current = tool_call("quote_fare", **self._pick("flight_id", "cabin", "passenger_ids"))
        else:
            self.current = tool_call("quote_change", **self._pick("pnr", "new_flight_id"))
        return self.current

    def feed(self, name: str | None, content: Any, error: str | None) -> str | tuple[str, Any, str | None]:
        """The next fine call, or (default tool name, merged content, error) when the plan is over."""
        if error and "busy" in error:
            return self.current  # the service asks for the same call again
        if error or not isinstance(content, dict):
            return self.name, None, error or f"unexpected answer from {name}"
        if name in {"search_flights", "results_page"}:
            self.results += search_results(content)
            if content["page"] < content["pages"]:
                self.current = tool_call("results_page", page=content["page"] + 1)
                return self.current
            return self.name, {"count": len(self.results), "results": self.results}, None
        if name in {"quote_fare", "quote_change"}:
            self.current = tool_call(
                "hold_seats", quote_id=content["quote_id"], **self._pick("seat", "seat_preference")
            )
            return self.current
        if name == "hold_seats":
            self.current = tool_call(
                "confirm_hold", hold_id=content["hold_id"], **self._pick("payment_method_id")
            )
            return self.current
        return self.name, content, None


class FineAdapter:
    """Any default-level policy, played at the fine level when the first observation offers it."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.plan: FinePlan | None = None
        self.fine = False

    def __getattr__(self, name: str) -> Any:  # the wrapped policy's own state (feedback, records)
        if name == "policy":  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.policy, name)

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        if "# Customer request" in observation:
            self.plan, self.fine = None, granularity_of(observation) == "fine"
        elif self.plan is not None:
            step = self.plan.feed(*last_response(observation))
            if isinstance(step, str):
                return step
            self.plan = None
            name, content, error = step
            observation = tool_response(name, error if error else content, error=bool(error))
        action = self.policy(observation, info)
        if self.fine and (plan := FinePlan.start(action)) is not None:
            self.plan = plan
            return plan.first()
        return action
