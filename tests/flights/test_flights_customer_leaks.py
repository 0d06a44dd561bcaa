"""Flights-v0's customer mode leaks no withheld value: `progress` (and the shaped reward built on
it) confirms no guess of the date, the passenger or the booking code before the customer has told
it; the customer mode's own hacks (never asking, asking with no keyword) win nothing, and the
oracle wins everything however it asks."""

from __future__ import annotations

import pytest
from customer_hacks import CUSTOMER_HACKS, NeverAsk
from flights_hacks import measure, play

from agentrl.core import tool_call as call
from agentrl.flights.asking import QUESTIONS
from agentrl.flights.tasks import FAMILIES, LEVELS

N_SEEDS = 5  # per family


def _guesses(request: dict) -> list[str]:
    """The calls that reach both subgoals, made with the withheld values (as a lucky guess would)."""
    look_up = (call("get_booking", pnr=request["pnr"]) if request["pnr"]
               else call("get_passenger", passenger_id=request["passengers"][0]))
    search = call("search_flights", origin=request["origin"], destination=request["destination"],
                  date=request["date"])
    return [look_up, search]


@pytest.mark.parametrize("user", [None, "deterministic"])
def test_progress_confirms_no_guess_before_the_customer_tells(make_flights, user):
    env = make_flights(user=user, privileged_info=True, shaped_reward=True)
    for family in FAMILIES:
        for seed in range(90_000, 90_004):
            env.reset(seed=seed, options={"family": family, "level": LEVELS[seed % 3]})
            r = env.task.request
            rewards = []
            for action in _guesses(r):
                _observation, reward, _terminated, _truncated, info = env.step(action)
                rewards.append(reward)
            if user is None:  # the whole request: the same calls reach both subgoals, and pay
                assert all(info["progress"].values()) and sum(rewards) == pytest.approx(0.2)
                continue
            assert not any(info["progress"].values()) and rewards == [0.0, 0.0], (family, seed)
            for question in QUESTIONS.values():  # told everything, the same calls count
                env.step(question)
            for action in _guesses(r):
                info = env.step(action)[4]
            assert all(info["progress"].values()), (family, seed)


def test_the_customer_modes_hacks_win_nothing():
    measured = measure(N_SEEDS, n_train=N_SEEDS, customer=True, only=set(CUSTOMER_HACKS))
    scores = measured["scores"]
    for hack in ("never ask (guess from the gist)", "one question with no keyword, then guess"):
        assert scores[hack] == dict.fromkeys([*FAMILIES, "all"], 0.0), hack
    for oracle in ("oracle", "oracle, one question per fact"):
        assert scores[oracle] == dict.fromkeys([*FAMILIES, "all"], 1.0), oracle
    never_asking = measured["policies"]["never ask (guess from the gist)"]
    assert len(never_asking) == N_SEEDS * len(FAMILIES)
    assert [p.confirmed for p in never_asking if p.confirmed] == []


def test_the_never_asking_probe_would_see_a_confirmation(make_flights):
    """The probe works: given the whole request (and so the date) its searches are confirmed."""
    env = make_flights(split="test")
    confirmed = [play(env, lambda e: NeverAsk(), s, {"family": "cheapest"})[1].confirmed
                 for s in range(90_000, 90_000 + N_SEEDS)]
    assert all(confirmed)
