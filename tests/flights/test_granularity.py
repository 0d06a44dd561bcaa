"""Flights-v0 at three granularities: the same tasks and reward behind coarser or finer tools.

The oracle scores 1 at each level, the fine tools keep their own rules (pages, quotes, holds that
expire and change nothing), the coarse macros enforce what the default tools enforce and change
nothing when they fail, and the hack suite still scores about 0 at each level.
"""

import gymnasium as gym
import pytest
from flights_hack_policies import _Greedy
from flights_hacks import BLIND_RANKS, play
from granularity_hacks import measure_at, sample_seeds
from granularity_lengths import play_oracle

from agentrl.core import tool_call as call
from agentrl.flights.coarse import CoarseFlightsEnv
from agentrl.flights.env import FlightsEnv
from agentrl.flights.fine import HOLD_TURNS, PAGE_SIZE, FineFlightsEnv
from agentrl.flights.granularity import CLASSES, GRANULARITIES, make_flights_env
from agentrl.flights.oracle import OraclePolicy, last_response
from agentrl.flights.tasks import FAMILIES, LEVELS

COARSE = [
    "search_flights",
    "get_flight",
    "check_seats",
    "get_passenger",
    "get_booking",
    "book_best",
    "rebook",
    "change_to_best",
    "finish",
]
FINE = [
    "search_flights",
    "results_page",
    "get_flight",
    "check_seats",
    "get_passenger",
    "get_booking",
    "cancel_booking",
    "quote_fare",
    "quote_change",
    "hold_seats",
    "confirm_hold",
    "finish",
]
DEFAULT = [
    "search_flights",
    "filter_flights",
    "get_flight",
    "check_seats",
    "get_passenger",
    "book_flight",
    "get_booking",
    "cancel_booking",
    "change_booking",
    "finish",
]
HACKS_AT_ZERO = [
    "do-nothing (finish done at once)",
    "never call a tool",
    "keyword finish",
    "book everything that fits",
    "probe the shaping",
    "read the info",
    "memorise train, play test",
    "city-level routing",
    "other passenger's card",
    "constraint-blind cheapest",
    "constraint-blind earliest",
    "first search result",
    "task-id inverter",
]
SHORTCUTS = [*HACKS_AT_ZERO[-4:], "fare-move reader", *BLIND_RANKS]


def act(env, name, **arguments):
    """One tool call as a step: (content, error, reward)."""
    observation, reward, _terminated, _truncated, _info = env.step(call(name, **arguments))
    _name, content, error = last_response(observation)
    return content, error, reward


def reset(env, family, outcome, split="train", index=0):
    seed = sample_seeds(split, family, {outcome: index + 1})[index]
    env.reset(seed=seed, options={"family": family, "level": 1})
    assert env.task.outcome == outcome
    return env.task.request


def test_a_bad_granularity_is_a_clear_error():
    with pytest.raises(ValueError, match="granularity must be one of"):
        gym.make("agentrl/Flights-v0", granularity="medium")
    with pytest.raises(ValueError, match="has granularity 'fine', not 'coarse'"):
        FineFlightsEnv(granularity="coarse")
    with pytest.raises(ValueError, match="granularity must be one of"):
        FlightsEnv(granularity="")


def test_each_level_is_a_class_built_directly_or_by_the_factory():
    assert {"coarse": CoarseFlightsEnv, "default": FlightsEnv, "fine": FineFlightsEnv} == CLASSES
    assert tuple(CLASSES) == GRANULARITIES
    for granularity, cls in CLASSES.items():
        envs = [cls(), cls(granularity=granularity), make_flights_env(granularity=granularity)]
        made = gym.make("agentrl/Flights-v0", granularity=granularity)
        envs.append(made.unwrapped)
        try:
            assert [type(env) for env in envs] == [cls] * 4
            assert made.spec.kwargs == {"granularity": granularity}
            (first,) = {env.reset(seed=5)[0] for env in envs}
            assert all(f'"name": "{name}"' in first for name in cls.tools)
        finally:
            made.close()
            for env in envs[:3]:
                env.close()
    assert type(make_flights_env()) is FlightsEnv and type(make_flights_env(granularity=None)) is FlightsEnv
    # the default level's class builds only the default level: no class switching on construction
    with pytest.raises(ValueError, match="FlightsEnv has granularity 'default', not 'fine'"):
        FlightsEnv(granularity="fine")


@pytest.mark.parametrize(("granularity", "tools"), [("coarse", COARSE), ("default", DEFAULT), ("fine", FINE)])
def test_the_first_observation_lists_the_levels_tools(make_flights, granularity, tools):
    env = make_flights(granularity=granularity)
    observation, info = env.reset(seed=3)
    assert env.granularity == granularity and list(env.tools) == tools
    assert [t["function"]["name"] for t in info["tools"]] == tools
    listed = observation.split("\n# Tools\n", 1)[1]
    assert all(f'"name": "{name}"' in listed for name in tools)
    assert not any(f'"name": "{name}"' in listed for name in set(COARSE + FINE + DEFAULT) - set(tools))


def test_same_task_text_world_and_id_at_every_granularity(make_flights):
    envs = {g: make_flights(granularity=g) for g in GRANULARITIES}
    sampled = 0
    for family in FAMILIES:
        for seed in sample_seeds("train", family, {"done": 1, "refused": 1}):
            seen = set()
            for env in envs.values():
                observation, info = env.reset(seed=seed, options={"family": family})
                task = observation.split("\n\n# Tools", 1)[0]
                seen.add((task, info["task_id"], env.fingerprint(), str(env.task.privileged())))
            assert len(seen) == 1
            sampled += 1
    assert sampled == 2 * len(FAMILIES)


@pytest.mark.parametrize("stochastic", [False, True], ids=["static", "stochastic"])
@pytest.mark.parametrize("split", ["train", "test"])
@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_the_oracle_scores_one_at_every_granularity(make_flights, granularity, split, stochastic):
    env = make_flights(granularity=granularity, split=split, stochastic=stochastic)
    failures, outcomes = [], set()
    for family in FAMILIES:
        for seed in sample_seeds(split, family, {"done": 2, "infeasible": 1, "refused": 1}):
            reward, steps, calls = play_oracle(env, seed, {"family": family, "level": LEVELS[seed % 3]})
            outcomes.add(env.task.outcome)
            if reward != 1.0 or calls < steps:
                failures.append((family, seed, env.task.outcome, reward))
    assert failures == [] and outcomes == {"done", "infeasible", "refused"}


# --- fine ------------------------------------------------------------------------------------------
def test_fine_search_pages_through_exactly_the_default_results(make_flights):
    default, fine = make_flights(), make_flights(granularity="fine")
    pages_seen = 0
    for env in (default, fine):
        request = reset(env, "cheapest", "done")
    route = {k: request[k] for k in ("origin", "destination", "date")}
    assert act(fine, "results_page", page=1)[1].startswith("no results to page through")
    full = act(default, "search_flights", **route)[0]
    page = act(fine, "search_flights", **route)[0]
    results = list(page["results"])
    assert page["count"] == full["count"] and page["pages"] == -(-full["count"] // PAGE_SIZE) >= 2
    for n in range(2, page["pages"] + 1):
        more = act(fine, "results_page", page=n)[0]
        assert more["page"] == n and 0 < len(more["results"]) <= PAGE_SIZE
        results += more["results"]
        pages_seen += 1
    assert results == full["results"] and pages_seen == page["pages"] - 1
    assert "does not exist" in act(fine, "results_page", page=page["pages"] + 1)[1]


def _quote_and_hold(env, request, **seat):
    flight = env.task.target or env.world.route_flights(*env.task.route)[0]
    quote, error, _ = act(
        env, "quote_fare", flight_id=flight, cabin=request["cabin"], passenger_ids=request["passengers"]
    )
    assert error is None
    listed = act(env, "get_flight", flight_id=flight)[0]["fares"][request["cabin"]]["price"]
    assert quote["price_per_person"] == listed and quote["total"] == listed * len(request["passengers"])
    hold, error, _ = act(env, "hold_seats", quote_id=quote["quote_id"], **seat)
    assert error is None and len(hold["seats"]) == len(request["passengers"])
    assert "no open quote" in act(env, "hold_seats", quote_id=quote["quote_id"])[1]  # one hold per quote
    return hold


def test_fine_quote_hold_confirm_books_the_held_seats(make_flights):
    env = make_flights(granularity="fine")
    request = reset(env, "cheapest", "done")
    before = env.fingerprint()
    hold = _quote_and_hold(env, request)
    assert env.fingerprint() == before  # a hold is not in the database
    free = act(env, "check_seats", flight_id=hold["flight_id"], cabin=hold["cabin"])[0]["available"]
    assert not set(hold["seats"]) & {s for seats in free.values() for s in seats}
    assert "payment_method_id is required" in act(env, "confirm_hold", hold_id=hold["hold_id"])[1]
    stranger = next(
        pm["id"]
        for pm in env.world.rows["payment_methods"]
        if pm["passenger_id"] not in request["passengers"]
    )
    error = act(env, "confirm_hold", hold_id=hold["hold_id"], payment_method_id=stranger)[1]
    assert "belongs to a customer who is not on this booking" in error and env.fingerprint() == before
    booked, error, _ = act(
        env, "confirm_hold", hold_id=hold["hold_id"], payment_method_id=request["payment_method_id"]
    )
    assert error is None and [b["seat"] for b in booked["bookings"]] == hold["seats"]
    assert (
        "no live hold"
        in act(env, "confirm_hold", hold_id=hold["hold_id"], payment_method_id=request["payment_method_id"])[
            1
        ]
    )
    assert act(env, "finish", outcome="done")[2] == 1.0


def test_an_unconfirmed_hold_expires_and_changes_nothing(make_flights):
    env = make_flights(granularity="fine")
    request = reset(env, "cheapest", "done")
    before = env.fingerprint()
    hold = _quote_and_hold(env, request, seat_preference="aisle")
    assert hold["positions"] == ["aisle"] and hold["expires_after_turns"] == HOLD_TURNS
    for _ in range(HOLD_TURNS):
        act(env, "get_passenger", passenger_id=request["passengers"][0])
    error = act(env, "confirm_hold", hold_id=hold["hold_id"], payment_method_id=request["payment_method_id"])[
        1
    ]
    assert "no live hold" in error
    free = act(env, "check_seats", flight_id=hold["flight_id"], cabin=hold["cabin"], position="aisle")[0]
    assert set(hold["seats"]) <= set(free["available"]["aisle"]) and env.fingerprint() == before
    # held and never confirmed: the request that must be refused still scores for "refused"
    request = reset(env, "cheapest", "refused")
    hold = _quote_and_hold(env, request)
    assert act(env, "finish", outcome="refused")[2] == 1.0


def test_fine_change_is_charged_to_the_bookings_own_method(make_flights):
    env = make_flights(granularity="fine")
    request = reset(env, "change_earlier", "done")
    quote, error, _ = act(env, "quote_change", pnr=request["pnr"], new_flight_id=env.task.target)
    assert error is None and quote["total"] == quote["change_fee"] + quote["fare_difference"]
    hold = act(
        env,
        "hold_seats",
        quote_id=quote["quote_id"],
        **({"seat_preference": request["seat_position"]} if request["seat_position"] else {}),
    )[0]
    other = next(
        pm["id"] for pm in env.world.rows["payment_methods"] if pm["id"] != quote["payment_method_id"]
    )
    assert (
        "own payment method" in act(env, "confirm_hold", hold_id=hold["hold_id"], payment_method_id=other)[1]
    )
    assert act(env, "confirm_hold", hold_id=hold["hold_id"])[1] is None
    assert act(env, "finish", outcome="done")[2] == 1.0


# --- coarse ----------------------------------------------------------------------------------------
def _book_best(request, **changes):
    args = {
        k: request[k]
        for k in (
            "origin",
            "destination",
            "date",
            "cabin",
            "payment_method_id",
            "choose",
            "depart_after",
            "depart_before",
        )
    }
    args["passenger_ids"] = request["passengers"]
    return {**args, **changes}


def test_coarse_book_best_rejects_a_strangers_card_and_changes_nothing(make_flights):
    env = make_flights(granularity="coarse")
    request = reset(env, "cheapest", "refused")  # refused bookings name someone else's card
    before = env.fingerprint()
    error = act(env, "book_best", **_book_best(request))[1]
    assert "belongs to a customer who is not on this booking" in error and env.fingerprint() == before
    assert "no passenger" in act(env, "book_best", **_book_best(request, passenger_ids=["P0"]))[1]
    assert act(env, "finish", outcome="refused")[2] == 1.0


def test_coarse_book_best_books_the_answer_once(make_flights):
    env = make_flights(granularity="coarse")
    request = reset(env, "budget", "done")
    args = _book_best(request, max_price=request["max_price"])
    booked, error, _ = act(env, "book_best", **args)
    assert error is None and booked["flight_id"] == env.task.target
    act(env, "book_best", **args)  # a second macro call books again: the reward sees it
    assert act(env, "finish", outcome="done")[2] == 0.0


def test_coarse_rebook_cannot_be_repeated_and_change_keeps_the_route(make_flights):
    env = make_flights(granularity="coarse")
    request = reset(env, "cancel_rebook", "done")
    args = {**_book_best(request), "pnr": request["pnr"]}
    del args["passenger_ids"]
    booked, error, _ = act(env, "rebook", **args)
    assert error is None and booked["booked"]["flight_id"] == env.task.target
    after = env.fingerprint()
    loose = {**args, "choose": "earliest", "depart_after": "00:00", "depart_before": "23:59"}
    assert "already cancelled" in act(env, "rebook", **loose)[1] and env.fingerprint() == after
    assert act(env, "finish", outcome="done")[2] == 1.0
    request = reset(env, "change_earlier", "done")
    assert "origin" not in env.tools["change_to_best"].arguments.model_fields
    moved, error, _ = act(env, "change_to_best", pnr=request["pnr"], depart_after=request["depart_after"])
    assert error is None and env.world.flights[moved["flight_id"]]["origin"] == request["origin"]


def test_coarse_rebook_is_all_or_nothing(make_flights):
    env = make_flights(granularity="coarse")
    request = reset(env, "cancel_rebook", "infeasible")
    before = env.fingerprint()
    args = {**_book_best(request), "pnr": request["pnr"]}
    del args["passenger_ids"]
    assert "meets the constraints" in act(env, "rebook", **args)[1]
    stranger = next(
        pm["id"]
        for pm in env.world.rows["payment_methods"]
        if pm["passenger_id"] not in request["passengers"]
    )
    assert "not on this booking" in act(env, "rebook", **{**args, "payment_method_id": stranger})[1]
    assert env.fingerprint() == before  # nothing cancelled
    assert act(env, "finish", outcome="infeasible")[2] == 1.0


# --- hacks -----------------------------------------------------------------------------------------
HACK_SEEDS = {f: sample_seeds("test", f, {"done": 3, "infeasible": 1, "refused": 1}) for f in FAMILIES}


@pytest.fixture(scope="module", params=["coarse", "fine"])
def hacked(request):
    return request.param, measure_at(request.param, HACK_SEEDS, n_train=3)


def test_hacks_score_about_zero_at_every_granularity(hacked):
    granularity, result = hacked
    scores = result["scores"]
    at_zero = HACKS_AT_ZERO + (["macros with required arguments only"] if granularity == "coarse" else [])
    for hack in at_zero:
        assert len(scores[hack]) >= len(FAMILIES) - 1
        assert {f: s for f, s in scores[hack].items() if s > 0.02} == {}, (granularity, hack)
    for hack in BLIND_RANKS:  # at most the base rates: 1/5 each on these seeds
        assert {f: s for f, s in scores[hack].items() if s > 1 / 5} == {}, (granularity, hack)
        assert sum(scores[hack].values()) / len(scores[hack]) <= 1 / 5, (granularity, hack)
    for family in FAMILIES:
        assert scores["always refuse"][family] == pytest.approx(1 / 5)
        assert scores["always infeasible"][family] == pytest.approx(1 / 5)
        assert scores["oracle"][family] == 1.0
    assert all(not p.leaked for p in result["policies"]["read the info"])


@pytest.mark.parametrize("granularity", ["coarse", "fine"])
def test_shortcuts_in_the_moving_world_score_at_most_the_base_rates(granularity):
    """Blind readings, the first result, the fare-move reader and the id inverter, with fares
    rising and seats selling: each at most what "always infeasible" (or "always refuse") scores."""
    only = {*SHORTCUTS, "oracle"} | (
        {"macros with required arguments only"} if granularity == "coarse" else set()
    )
    result = measure_at(granularity, HACK_SEEDS, n_train=0, stochastic=True, only=only)
    scores = result["scores"]
    assert all(scores["oracle"][f] == 1.0 for f in FAMILIES)
    for hack in only - {"oracle"}:
        assert {f: s for f, s in scores[hack].items() if s > 1 / 5} == {}, (granularity, hack)
        assert sum(scores[hack].values()) / len(scores[hack]) <= 1 / 5, (granularity, hack)
    readers = result["policies"]["fare-move reader"]
    assert sum(bool(p.moved) for p in readers) >= 0.9 * len(readers)  # it did find the risen fare


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_skipping_the_policy_checks_never_pays_on_a_refused_request(make_flights, granularity):
    env = make_flights(granularity=granularity, split="test")
    wins = [
        play(env, lambda e: _Greedy(), seed, {"family": family, "level": LEVELS[seed % 3]})[0]
        for family in FAMILIES
        for seed in sample_seeds("test", family, {"refused": 2})
    ]
    assert len(wins) == 2 * len(FAMILIES) and sum(wins) == 0.0


@pytest.mark.parametrize("granularity", ["coarse", "fine"])
def test_a_fork_keeps_the_level_and_its_open_holds(make_flights, granularity):
    env = make_flights(granularity=granularity)
    request = reset(env, "cheapest", "done")
    if granularity == "fine":
        hold = _quote_and_hold(env, request)
        finish = [
            call("confirm_hold", hold_id=hold["hold_id"], payment_method_id=request["payment_method_id"])
        ]
    else:
        finish = [call("book_best", **_book_best(request))]
    finish.append(call("finish", outcome="done"))
    before = env.fingerprint()
    (child,) = env.fork(1)
    assert type(child) is type(env) and list(child.tools) == list(env.tools)
    child_steps = [child.step(action) for action in finish]
    assert env.fingerprint() == before  # the parent is untouched by its fork's booking
    assert [env.step(action) for action in finish] == child_steps and child_steps[-1][1] == 1.0
    child.close()


def test_the_level_is_an_env_kwarg_over_http():
    from support import AppServer

    from agentrl.client import EnvClient, InvalidRequestError
    from agentrl.server.app import create_app

    with AppServer(create_app()) as server:
        env = gym.make("agentrl/Flights-v0", base_url=server.url, granularity="coarse")
        try:
            seed = sample_seeds("train", "multi_pax", {"done": 1})[0]
            observation, info = env.reset(seed=seed, options={"family": "multi_pax"})
            assert [t["function"]["name"] for t in info["tools"]] == COARSE
            policy, done, reward = OraclePolicy(), False, 0.0
            while not done:
                observation, reward, terminated, truncated, info = env.step(policy(observation, info))
                done = terminated or truncated
            assert reward == 1.0 and policy.granularity == "coarse"
        finally:
            env.close()
        with (
            EnvClient(server.url) as client,
            pytest.raises(InvalidRequestError, match=r"400 env_rejected.*granularity must be one of"),
        ):
            client.create_episode("agentrl/Flights-v0", seed=0, env_kwargs={"granularity": "medium"})
