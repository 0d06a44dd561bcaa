"""Flights-v0: book, cancel and change flights through tools over a per-episode SQLite world.

Each seed has its own world (see `world.py`), and each episode's database is a page copy of its
cached template; the tools are ORM queries against it. The first observation gives the desk
policy and the customer's request; the agent ends with `finish(outcome=...)`, and the reward is
the verifier's judgement of that outcome and of the final database (see `verify.py`). Stochastic
options make the world move while the agent works: other customers buy seats, the service is
sometimes busy, and a fare may rise between search and booking.

Past 500 lines on purpose: the tools are the env's spec and read best side by side in one class;
what is not a tool already lives apart (queries, episode database, compact mode, customer, oracle).
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np
from sqlalchemy import Row

from agentrl.core import Tool, ToolEnv, ToolError, tool
from agentrl.core.parsing import parse_tool_calls
from agentrl.core.results import StepResult
from agentrl.flights.compact import OBSERVATIONS, compact_policy_text, compact_result, signatures
from agentrl.flights.customer import USER_KINDS, Customer, identifying, make_customer
from agentrl.flights.episode import EpisodeDatabase
from agentrl.flights.geography import AIRPORT_CITY, CITY_AIRPORTS
from agentrl.flights.queries import (
    ADD_BOOKING,
    CANCEL,
    FLIGHT_FARES,
    METHOD,
    MOVE,
    PASSENGER_PNRS,
    PAYMENT_METHODS,
    SET_PRICE,
    ChangeCost,
    WorldQueries,
)
from agentrl.flights.schemas import (
    BookArgs,
    BookingArgs,
    ChangeArgs,
    FilterArgs,
    FinishArgs,
    FlightArgs,
    PassengerArgs,
    SearchArgs,
    SeatsArgs,
)
from agentrl.flights.task_ids import key_bytes
from agentrl.flights.tasks import FAMILIES, LEVELS, SPLITS, TASKS, Task
from agentrl.flights.text import policy_text
from agentrl.flights.verify import verify
from agentrl.flights.world import (
    CABINS,
    POSITIONS,
    SEAT_INFO,
    WORLDS,
    World,
    fingerprint,
    new_pnr,
)

BUSY = "service busy, please retry the same call"
# the interaction levels, each a class with its own tool table (see `granularity.py`)
GRANULARITIES = ("coarse", "default", "fine")
# subgoals every task shares, each open to every candidate answer and to every outcome
GOALS = ("looked_up_customer", "searched_route")
# what `Tool.method` names in compact mode: the tool of that name, its result trimmed (`__getattr__`)
COMPACT_METHOD = "_compact_"


class FlightsEnv(WorldQueries, EpisodeDatabase, ToolEnv):
    """An airline customer-service desk: handle one customer's request under a written policy.

    ## Description
    Each seed has its own world (airports, flights, customers, bookings) in a per-episode SQLite
    database, and a request from one of six families (`cheapest`, `seat`, `budget`, `multi_pax`,
    `cancel_rebook`, `change_earlier`) at one of three levels. The agent looks things up and books,
    cancels or changes through tools, then declares the outcome with `finish`: done, infeasible (no
    flight satisfies the request) or refused (the policy forbids it). With `stochastic=True` the world
    moves while the agent works: other customers buy seats, the service is sometimes busy, a fare may
    rise between search and booking.

    ## Action Space
    Text (`TextSpace`): tool calls, `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, up to 8
    a turn. `granularity` ("coarse" | "default" | "fine") puts the same desk behind other tools: each
    level is a subclass, which `gym.make("agentrl/Flights-v0", granularity=...)` builds
    (`granularity.py`). With a customer (`user` set), a turn with no tool call is a message to it.

    ## Observation Space
    Text (`TextSpace`): first the policy, the request and the tools, then the tool results inside
    `<tool_response>` tags, or the customer's reply. `observation="full"` (default) gives the policy in
    prose and the tools as JSON schemas; `"compact"` the policy as short rules, the tools as one-line
    signatures and trimmed tool results (`compact.py`). Tasks, tools, actions and rewards are the same in
    both. A malformed call is answered with an error message.

    ## Rewards
    1 at the end only if `finish` declared the right outcome and the final database holds exactly the
    requested change (none when the request is infeasible or refused) and nothing else (`verify.py`);
    otherwise 0. With `shaped_reward=True`, also `shaping` the first time each subgoal every task shares
    is reached (the customer looked up, the route searched; `info["progress"]`).

    ## Starting State
    `reset(seed=n)` plays task n of the split; `options` may name `family`, `level`, `split` and
    `world_seed` (one of many moving worlds for the same task). `user=None` (default): the first
    observation holds the whole request. `user="deterministic"`: only the customer's opening (goal and
    route), the rest told when asked, by keyword rules (`customer.py`); `user="llm"`: the same opening,
    then a chat model answers. `info` carries the task's opaque `task_id` (a keyed hash, see
    `task_ids.py`), its split and `progress`; what the task is only with `privileged_info=True`.

    ## Episode End
    - Termination: `finish` is called.
    - Truncation: after `max_turns` steps (default 30); the database is judged as it is, with no
      outcome declared, so the reward is 0 (plus any shaping already paid).

    ## Arguments
    `days` (1), `families` and `levels` (all), `split` ("train"); `stochastic` (False) or each of its
    parts: `churn`, `busy_rate`, `fare_changes`; `shaped_reward` (False), `shaping` (0.1);
    `privileged_info` (False) and `task_id_key`, an operator's secret (default: a random key per
    process); `granularity`, `observation`; `user` with `user_model`, `user_base_url` (an
    OpenAI-compatible endpoint), `user_api_key`, `user_temperature` (0.0) and `user_seed` (0), kept in
    the episode's record; `max_turns` (30), `render_mode`.
    """

    default_max_turns = 30
    max_calls_per_turn = 8
    task_fields: ClassVar[tuple[str, ...]] = ("family", "level", "split")
    # the answer key: a server takes it from its operator only (oracle analysis, SFT export)
    # and the task-id key: a client that chose it could invert the ids (see `task_ids.py`)
    # and the customer model's endpoint and key (as TauAirline-v0's)
    operator_kwargs = frozenset({"privileged_info", "task_id_key", "user_base_url", "user_api_key"})
    granularity: ClassVar[str] = "default"
    # the episode's world and request: set by every reset, and no tool runs before the first
    world: World
    task: Task

    def __init__(
        self,
        *,
        days: int = 1,
        families: tuple[str, ...] | list[str] | None = None,
        levels: tuple[int, ...] | list[int] | None = None,
        split: str = "train",
        stochastic: bool = False,
        churn: bool | None = None,
        busy_rate: float | None = None,
        fare_changes: bool | None = None,
        shaped_reward: bool = False,
        shaping: float = 0.1,
        privileged_info: bool = False,
        task_id_key: str | None = None,
        max_turns: int | None = None,
        render_mode: str | None = None,
        granularity: str | None = None,
        user: str | None = None,
        user_model: str | None = None,
        user_base_url: str | None = None,
        user_api_key: str | None = None,
        user_temperature: float = 0.0,
        user_seed: int | None = 0,
        observation: str = "full",
    ) -> None:
        # the level is the class (`make_flights_env` picks it); the argument is accepted and checked so
        # that the kwargs `gym.make` was given rebuild the same env (a replayed fork, a recipe)
        self._check_granularity(granularity)
        super().__init__(max_turns=max_turns, render_mode=render_mode)
        if days < 1:
            raise ValueError("days must be at least 1")
        self.days = days
        self.families = tuple(families or FAMILIES)
        self.levels = tuple(levels or LEVELS)
        self.split = split
        self._check_choice(self.families, self.levels, split)
        self.churn = stochastic if churn is None else churn
        self.busy_rate = (0.15 if stochastic else 0.0) if busy_rate is None else busy_rate
        self.fare_changes = stochastic if fare_changes is None else fare_changes
        self.shaped_reward, self.shaping = shaped_reward, shaping
        self.privileged_info = privileged_info
        self._task_id_key = key_bytes(task_id_key)
        if user not in USER_KINDS:
            raise ValueError(f"user must be one of {USER_KINDS} (None: the whole request), not {user!r}")
        if user == "llm" and (not user_model or not user_base_url):
            raise ValueError("user='llm' needs user_model and user_base_url (an OpenAI-compatible endpoint)")
        self.user_kind = user
        self.user_model = {"base_url": user_base_url, "model": user_model, "temperature": user_temperature,
                           "seed": user_seed, "api_key": user_api_key}
        if observation not in OBSERVATIONS:
            raise ValueError(f"observation must be one of {OBSERVATIONS}, not {observation!r}")
        self.observation_mode = observation
        if observation == "compact":  # the same tools, each answering through `__getattr__`
            self.tools: dict[str, Tool] = {
                name: dataclasses.replace(spec, method=COMPACT_METHOD + spec.method)
                for name, spec in type(self).tools.items()
            }
        self.customer: Customer | None = None
        self._open_database()
        self._reset_seed: int | None = None
        self.world = None  # type: ignore[assignment]  # until the first reset
        self.task = None  # type: ignore[assignment]  # until the first reset

    @classmethod
    def _check_granularity(cls, granularity: str | None) -> None:
        if granularity is None or granularity == cls.granularity:
            return
        if granularity not in GRANULARITIES:
            raise ValueError(f"granularity must be one of {GRANULARITIES}, not {granularity!r}")
        raise ValueError(
            f"{cls.__name__} has granularity {cls.granularity!r}, not {granularity!r}: "
            "gym.make('agentrl/Flights-v0', granularity=...) builds each level's class"
        )

    @staticmethod
    def _check_choice(families: tuple[str, ...], levels: tuple[int, ...], split: str) -> None:
        if unknown := set(families) - set(FAMILIES):
            raise ValueError(f"unknown task families {sorted(unknown)}; choose from {FAMILIES}")
        if unknown_levels := set(levels) - set(LEVELS):
            raise ValueError(f"unknown levels {sorted(unknown_levels)}; choose from {LEVELS}")
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}")

    # --- episode lifecycle -----------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        self._reset_seed = seed
        return super().reset(seed=seed, options=options)

    def _reset_world(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        known = (*self.task_fields, "world_seed")
        if unknown := set(options) - set(known):
            raise ValueError(f"unknown reset options {sorted(unknown)}; known: {known}")
        world_seed = options.get("world_seed")
        if world_seed is not None and (type(world_seed) is not int or world_seed < 0):
            raise ValueError(f"world_seed must be a non-negative integer, not {world_seed!r}")
        family = options.get("family") or self.families[int(self.np_random.integers(len(self.families)))]
        level = int(options.get("level") or self.levels[int(self.np_random.integers(len(self.levels)))])
        split = options.get("split", self.split)
        self._check_choice((family,), (level,), split)
        index = self._reset_seed if self._reset_seed is not None else int(self.np_random.integers(2**31))
        self.world, self.task = TASKS.get(split, index, self.days, family, level, self.fare_changes)
        self.session.close()
        WORLDS.copy_into(self.world, self._raw)
        # the moving world's own stream: the task's by default, or one of many for the same task
        # (`world_seed`), so that a group of rollouts of one task can meet different worlds
        words = [index, SPLITS.index(split), 31337] + ([] if world_seed is None else [world_seed])
        self._rng = np.random.default_rng(words)
        self._last_search: list[int] = []
        self._pnrs = set(self.world.bookings)
        self._was_busy = False
        self._fare_changed = False
        self._outcome: str | None = None
        self._progress: dict[str, bool] = dict.fromkeys(GOALS, False)
        self._paid_goals = 0
        task_id = self.task.task_id(self.days, self.fare_changes, self._task_id_key)
        info: dict[str, Any] = {"task_id": task_id, "split": split}
        if self.privileged_info:
            info["task"] = {**self.task.privileged(), "world": list(self.world.key)}
        policy = compact_policy_text if self.observation_mode == "compact" else policy_text
        text = f"{policy(self.world.now)}\n\n# Customer request\n{self._request_text()}"
        return text, info

    def _tools_text(self, specs: list[dict[str, Any]]) -> str:  # type: ignore[override]
        """The tool list of the first observation: JSON schemas, or one-line signatures (compact)."""
        if self.observation_mode == "compact":
            return signatures(type(self).tools)
        return super()._tools_text(specs)

    def __getattr__(self, name: str) -> Any:
        """Compact mode's tool methods (`COMPACT_METHOD` + a tool's method): the tool, its result
        trimmed for the compact observation (`compact.compact_result`)."""
        if not name.startswith(COMPACT_METHOD):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        tool = name.removeprefix(COMPACT_METHOD)  # a tool's method is named as the tool (`@tool`)
        method = getattr(self, tool)
        return lambda *args: compact_result(tool, method(*args))

    def _request_text(self) -> str:
        """The request as the first observation gives it: whole, or the customer's opening."""
        if self.user_kind is None:
            return self.task.text
        names = {p: self.world.passengers[p]["name"] for p in self.task.request["passengers"]}
        self.customer = make_customer(self.user_kind, self.task.request, names, self.task.text,
                                      self.user_model)
        return self.customer.first_message()

    def _act(self, action: str) -> StepResult:
        if self.customer is None or parse_tool_calls(action, self.max_calls_per_turn):
            return super()._act(action)
        result = self.customer.turn(action, self._step_calls, self._step_reward(), self._step_info())
        self._show(result.observation)  # what the customer told is known from here on
        return result

    def _trace_meta(self) -> dict[str, Any]:
        return {"user": self.customer.settings()} if self.customer is not None else {}

    def _mark(self, goal: str) -> None:
        # with a customer, only once it has told what the subgoal would confirm (see `customer.py`)
        if self.customer is None or self.customer.told(identifying(self.task.request, goal)):
            self._progress[goal] = True

    def _step_info(self) -> dict[str, Any]:
        if self.task is None:
            return {}
        return {"progress": dict(self._progress)}

    def _step_reward(self) -> float:
        if not self.shaped_reward:
            return 0.0
        reached = sum(self._progress.values())
        paid, self._paid_goals = self._paid_goals, reached
        return self.shaping * (reached - paid)

    def _final_reward(self) -> float:
        return float(verify(self.session, self.world, self.task, self._outcome))

    def close(self) -> None:
        self.session.close()
        self._engine.dispose()

    def fingerprint(self) -> str:
        """Hash of the episode database's current contents (see `world.fingerprint`)."""
        with self._engine.connect() as conn:
            return fingerprint(conn)

    # --- the moving world --------------------------------------------------------------------
    def _service(self) -> None:
        """Run before every tool: maybe refuse as busy, maybe let other customers buy seats."""
        if self.busy_rate and not self._was_busy and self._rng.random() < self.busy_rate:
            self._was_busy = True
            raise ToolError(BUSY)
        self._was_busy = False
        if self.churn and self._rng.random() < 0.5:
            self._churn()

    def _churn(self) -> None:
        """Sell a seat on a flight the request's search lists (drawn uniformly: the answer and its
        rivals alike), never the last of a cabin or seat type.

        Keeping those classes non-empty keeps every task's answer stable while the seat maps move.
        """
        flights = self.world.city_flights(*self.task.route)
        if not flights:
            return
        flight_id = flights[int(self._rng.integers(len(flights)))]
        cabin = CABINS[int(self._rng.integers(len(CABINS)))]
        free = self._free_seats(flight_id, cabin)
        if sum(len(v) for v in free.values()) <= 6:
            return
        position = POSITIONS[int(self._rng.integers(len(POSITIONS)))]
        if len(free[position]) <= 1:
            return
        seat_no = free[position][int(self._rng.integers(len(free[position])))]
        self._occupy(flight_id, seat_no, cabin, "churn", None)
        self.session.commit()

    def _maybe_change_fare(self) -> None:
        """The first write meets the task's fare rise (on a flight drawn independently of the answer)
        and fails, whatever flight it names; a new search shows the risen fare."""
        if self.task.fare_change and not self._fare_changed:
            flight_id, cabin, price = self.task.fare_change
            self._fare_changed = True
            self._conn.execute(SET_PRICE, {"at_flight": flight_id, "at_cabin": cabin, "new_price": price})
            self.session.commit()
            raise ToolError(
                "fares on this route changed since your search; nothing was booked or changed. "
                "Search again for current prices."
            )

    def _change_terms(self, pnr: str, new_flight_id: int) -> tuple[Row[Any], SimpleNamespace, ChangeCost]:
        """A change's checks (booking confirmed, another flight of its route), then the fare may
        move, then its cost: (booking, new flight, cost). `change_booking` and the fine level's
        `quote_change` both go through here, so a quote refuses exactly what the change would."""
        booking = self._confirmed_booking(pnr)
        old, new = self._flight(booking.flight_id), self._flight(new_flight_id)
        if (old.origin, old.destination) != (new.origin, new.destination) or old.id == new.id:
            raise ToolError(f"a booking can only move to another {old.origin}->{old.destination} flight")
        self._maybe_change_fare()
        return booking, new, self._change_cost(booking, new.id)

    # --- tools ---------------------------------------------------------------------------------
    @tool(
        "Search flights by origin, destination and date. Results include nearby airports of the same "
        "cities and are not sorted."
    )
    def search_flights(self, args: SearchArgs) -> dict[str, Any]:
        self._service()
        origins = CITY_AIRPORTS.get(AIRPORT_CITY.get(args.origin, ""), [])
        destinations = CITY_AIRPORTS.get(AIRPORT_CITY.get(args.destination, ""), [])
        if not origins or not destinations:
            raise ToolError(f"unknown airport code; known: {', '.join(sorted(AIRPORT_CITY))}")
        found = [
            fid for o in origins for d in destinations for fid in self.world.route_flights(o, d, args.date)
        ]
        found.sort(key=lambda fid: self.world.flights[fid]["number"])
        self._last_search = found
        if (args.origin, args.destination, args.date) == self.task.route:
            self._mark("searched_route")
        return {"count": len(found), "results": self._summaries(found)}

    @tool("Filter and sort the results of the last search_flights call.")
    def filter_flights(self, args: FilterArgs) -> dict[str, Any]:
        self._service()
        if not self._last_search:
            raise ToolError("nothing to filter: call search_flights first")
        rows = self._summaries(self._last_search)
        cabin = args.cabin or "economy"
        rows = [
            r
            for r in rows
            if args.depart_after <= r["departs"] <= args.depart_before
            and (args.origin is None or r["origin"] == args.origin)
            and (args.destination is None or r["destination"] == args.destination)
            and (args.max_price is None or r["fares"][cabin]["price"] <= args.max_price)
            and (args.cabin is None or r["fares"][cabin]["seats_left"] > 0)
        ]
        if args.sort_by == "price":
            rows.sort(key=lambda r: (r["fares"][cabin]["price"], r["departs"]))
        elif args.sort_by == "departure":
            rows.sort(key=lambda r: r["departs"])
        return {"count": len(rows), "results": rows}

    @tool("Details of one flight: schedule, fares, fare rules and seats left per cabin.")
    def get_flight(self, args: FlightArgs) -> dict[str, Any]:
        self._service()
        flight = self._flight(args.flight_id)
        summary = self._summaries([flight.id])[0]
        for fare in self._conn.execute(FLIGHT_FARES, {"flight_id": flight.id}):
            summary["fares"][fare.cabin].update(
                refund_pct=fare.refund_pct, change_fee=fare.change_fee, changeable=fare.changeable
            )
        summary["carrier"] = flight.carrier
        return summary

    @tool("Free seats of a flight's cabin, grouped by window / aisle / middle.")
    def check_seats(self, args: SeatsArgs) -> dict[str, Any]:
        self._service()
        self._flight(args.flight_id)
        free = self._free_seats(args.flight_id, args.cabin)
        if args.position:
            free = {args.position: free[args.position]}
        return {
            "flight_id": args.flight_id,
            "cabin": args.cabin,
            "available": free,
            "counts": {p: len(s) for p, s in free.items()},
        }

    @tool("A passenger's profile: payment methods with balances, and bookings.")
    def get_passenger(self, args: PassengerArgs) -> dict[str, Any]:
        self._service()
        # the profile never changes during an episode (the world's row); balances and bookings do
        passenger = self.world.passengers.get(args.passenger_id)
        if passenger is None:
            raise ToolError(f"no passenger {args.passenger_id!r}")
        pid = passenger["id"]
        methods = self._conn.execute(PAYMENT_METHODS, {"passenger_id": pid}).all()
        pnrs = self._conn.execute(PASSENGER_PNRS, {"passenger_id": pid}).scalars().all()
        if not self.task.request["pnr"] and pid == self.task.request["passengers"][0]:
            self._mark("looked_up_customer")
        return {
            "passenger_id": pid,
            "name": passenger["name"],
            "email": passenger["email"],
            "payment_methods": [{"id": p.id, "kind": p.kind, "balance": p.balance} for p in methods],
            "bookings": pnrs,
        }

    @tool(
        "Book seats on a flight for one or more passengers, paid by one payment method. Give an exact "
        "seat (one passenger only) or a seat preference; otherwise the first free seats are assigned."
    )
    def book_flight(self, args: BookArgs) -> dict[str, Any]:
        self._service()
        flight = self._flight(args.flight_id)
        if args.seat and len(args.passenger_ids) > 1:
            raise ToolError("an exact seat can only be given for one passenger; use seat_preference")
        if len(set(args.passenger_ids)) != len(args.passenger_ids):
            raise ToolError("a passenger is listed twice")
        self._check_passengers(args.passenger_ids)
        self._check_payer(args.payment_method_id, args.passenger_ids)
        self._maybe_change_fare()
        price = self._fare(flight.id, args.cabin).price
        seats = self._pick_seat(
            flight.id, args.cabin, args.seat, args.seat_preference, len(args.passenger_ids)
        )
        pm = self._payment_method(args.payment_method_id, price * len(args.passenger_ids))
        made, rows = [], []
        for pid, seat_no in zip(args.passenger_ids, seats, strict=True):
            pnr = new_pnr(self._rng)
            while pnr in self._pnrs:
                pnr = new_pnr(self._rng)
            self._pnrs.add(pnr)
            position = SEAT_INFO[flight.aircraft][seat_no][4]
            made.append(
                {"pnr": pnr, "passenger_id": pid, "seat": seat_no, "position": position, "fare_paid": price}
            )
            rows.append(
                dict(
                    pnr=pnr,
                    passenger_id=pid,
                    flight_id=flight.id,
                    cabin=args.cabin,
                    seat_no=seat_no,
                    fare_paid=price,
                    payment_method_id=pm.id,
                    status="confirmed",
                )
            )
        # in the order the ORM wrote them: the bookings, their seats, the ledger, the balance
        self._conn.execute(ADD_BOOKING, rows)
        for b in made:
            self._occupy(flight.id, b["seat"], args.cabin, "booking", b["pnr"])
        balance = self._charge(pm, [(b["pnr"], "fare", price) for b in made])
        self.session.commit()
        return {
            "status": "confirmed",
            "flight_id": flight.id,
            "cabin": args.cabin,
            "bookings": made,
            "total_charged": price * len(made),
            "payment_method_id": pm.id,
            "balance_after": balance,
        }

    @tool("Look up a booking by its PNR, with its flight and fare rules.")
    def get_booking(self, args: BookingArgs) -> dict[str, Any]:
        self._service()
        view = self._booking_view(self._booking(args.pnr))
        if view["pnr"] == self.task.request["pnr"]:
            self._mark("looked_up_customer")
        return view

    @tool(
        "Cancel a booking: its seat is released and refund_pct of the fare paid goes back to the payment "
        "method it was paid with."
    )
    def cancel_booking(self, args: BookingArgs) -> dict[str, Any]:
        self._service()
        booking = self._confirmed_booking(args.pnr, "is already")
        refund = booking.fare_paid * self._fare(booking.flight_id, booking.cabin).refund_pct // 100
        pm = self._conn.execute(METHOD, {"pm_id": booking.payment_method_id}).one()
        self._conn.execute(CANCEL, {"at_pnr": booking.pnr})
        self._release(booking.flight_id, booking.seat_no)
        balance = self._charge(pm, [(booking.pnr, "refund", -refund)])
        self.session.commit()
        return {
            "pnr": booking.pnr,
            "status": "cancelled",
            "refund": refund,
            "payment_method_id": pm.id,
            "balance_after": balance,
        }

    @tool(
        "Move a booking to another flight on the same route, same cabin. Charges the change fee plus any "
        "higher fare (a lower fare is not refunded)."
    )
    def change_booking(self, args: ChangeArgs) -> dict[str, Any]:
        self._service()
        booking, new, cost = self._change_terms(args.pnr, args.new_flight_id)
        seat_no = self._pick_seat(new.id, booking.cabin, args.seat, args.seat_preference, 1)[0]
        pm = self._payment_method(booking.payment_method_id, cost.fee + cost.difference)
        self._release(booking.flight_id, booking.seat_no)
        self._conn.execute(
            MOVE,
            {
                "at_pnr": booking.pnr,
                "new_flight": new.id,
                "new_seat": seat_no,
                "new_fare": booking.fare_paid + cost.difference,
            },
        )
        self._occupy(new.id, seat_no, booking.cabin, "booking", booking.pnr)
        charges = [("change_fee", cost.fee), ("fare_difference", cost.difference)]
        balance = self._charge(pm, [(booking.pnr, kind, amount) for kind, amount in charges if amount])
        self.session.commit()
        return {
            "pnr": booking.pnr,
            "status": "confirmed",
            "flight_id": new.id,
            "seat": seat_no,
            "charged": cost.fee + cost.difference,
            "balance_after": balance,
        }

    @tool(
        "End the conversation: declare the outcome (done: the request was carried out; infeasible: no "
        "flight satisfies it, nothing changed; refused: the policy forbids it, nothing changed) and "
        "give the customer a message.",
        ends_episode=True,
    )
    def finish(self, args: FinishArgs) -> str:
        self._outcome = args.outcome
        return "conversation closed"
