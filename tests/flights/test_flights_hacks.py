"""Reward hacks score about 0 on held-out seeds; the oracle scores 1 (see flights_hacks.py), in the
full observation mode and in the compact one."""

import gymnasium as gym
import pytest
from flights_hack_policies import Memorise, ReadInfo
from flights_hacks import BLIND_RANKS, TRAIN_BASE, learn_from_train, markdown, measure, play
from granularity_hacks import measure_at, sample_seeds

from agentrl.flights.tasks import FAMILIES, LEVELS

N_SEEDS = 40  # per family: one block of seeds, so the base rates are exact
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
# hacks whose bound is the base rates: what one outcome declared for every task scores (the blind
# places past the first: the answer stands at each of them now and then, see `Draw.decide`)
AT_MOST_BASE_RATES = ["fare-move reader", *HACKS_AT_ZERO[-4:], *BLIND_RANKS]


@pytest.fixture(scope="module")
def result():
    measured = measure(N_SEEDS, n_train=N_SEEDS)
    print("\n" + markdown(measured, N_SEEDS))
    return measured


@pytest.mark.slow
@pytest.mark.parametrize("hack", HACKS_AT_ZERO)
def test_hack_scores_about_zero(result, hack):
    row = result["scores"][hack]
    assert len(row) >= len(FAMILIES)  # every family that applies, and "all"
    assert {f: score for f, score in row.items() if score > 0.02} == {}


@pytest.fixture(scope="module")
def moving():
    """The hacks the moving world could feed (fare rises, churn), played in it."""
    measured = measure(N_SEEDS, n_train=0, stochastic=True, only=set(AT_MOST_BASE_RATES))
    print("\nstochastic world\n" + markdown(measured, N_SEEDS))
    return measured


def assert_within_base_rates(measured):
    """Per family at most the larger base rate (the infeasible one), overall at most the smaller."""
    rates, scores = measured["rates"], measured["scores"]
    for hack in AT_MOST_BASE_RATES:
        for family in FAMILIES:
            assert scores[hack][family] <= rates[family]["infeasible"], (hack, family)
        smaller = min(rates[f][o] for f in FAMILIES for o in ("infeasible", "refused"))
        assert scores[hack]["all"] <= smaller, hack


@pytest.mark.slow
def test_shortcuts_score_at_most_the_base_rates_static_and_moving(result, moving):
    assert_within_base_rates(result)
    assert_within_base_rates(moving)
    assert moving["scores"]["oracle"] == dict.fromkeys([*FAMILIES, "all"], 1.0)
    # the moving world's own shortcut: blind to the constraints it still pays nothing
    for hack in HACKS_AT_ZERO[-4:]:
        assert {f: s for f, s in moving["scores"][hack].items() if s > 0.02} == {}, hack


@pytest.mark.slow
def test_the_fare_move_reader_really_reads_moves(moving):
    """It provokes the notice and finds the risen fare in every episode of the moving world."""
    readers = moving["policies"]["fare-move reader"]
    assert all(p.provoked for p in readers)
    assert sum(bool(p.moved) for p in readers) >= 0.9 * len(readers)


@pytest.mark.slow
def test_one_outcome_for_everything_scores_at_most_the_infeasible_rate(result):
    rates, scores = result["rates"], result["scores"]
    for family in FAMILIES:
        assert scores["always infeasible"][family] == pytest.approx(rates[family]["infeasible"])
        assert scores["always refuse"][family] == pytest.approx(rates[family]["refused"])
        assert rates[family]["refused"] <= rates[family]["infeasible"] <= 0.15
        assert rates[family]["infeasible"] >= 0.10


@pytest.mark.slow
def test_oracle_is_perfect_and_random_is_near_zero(result):
    assert result["scores"]["oracle"] == dict.fromkeys([*FAMILIES, "all"], 1.0)
    assert result["scores"]["random"]["all"] <= 0.05


@pytest.mark.slow
def test_probes_of_single_flights_never_pay(result):
    probes = [r for policy in result["policies"]["probe the shaping"] for r in policy.probe_rewards]
    assert len(probes) > 1000 and set(probes) == {0.0}


@pytest.mark.slow
def test_info_leaks_nothing_and_the_reader_would_use_a_leak(result):
    assert all(not p.leaked for p in result["policies"]["read the info"])
    env = gym.make("agentrl/Flights-v0", split="test", privileged_info=True).unwrapped
    wins = sum(play(env, lambda e: ReadInfo(), 90_000 + s, {"family": "cheapest"})[0] for s in range(40))
    assert wins / 40 >= 0.2  # with the answer key in info, the same policy scores the non-done tasks


@pytest.mark.slow
def test_memoriser_replays_train_but_finds_nothing_of_test(result):
    texts, routes = learn_from_train(8)
    env = gym.make("agentrl/Flights-v0").unwrapped
    wins = [
        play(env, lambda e: Memorise(texts, routes), s, {"family": f, "level": LEVELS[s % 3]})[0]
        for f in FAMILIES
        for s in range(TRAIN_BASE, TRAIN_BASE + 8)
    ]
    assert sum(wins) / len(wins) >= 0.9  # seen texts are solved by replay...
    assert result["scores"]["memorise train, play test"]["all"] == 0.0  # ...held-out ones are never seen


@pytest.fixture(scope="module")
def with_customer():
    """Every hack against the deterministic customer, asking it for the whole request first."""
    measured = measure(N_SEEDS, n_train=N_SEEDS, customer=True)
    print("\nwith the deterministic customer\n" + markdown(measured, N_SEEDS))
    return measured


@pytest.mark.slow
def test_hacks_with_the_customer_score_no_more(with_customer):
    scores = with_customer["scores"]
    for hack in HACKS_AT_ZERO:
        assert {f: s for f, s in scores[hack].items() if s > 0.02} == {}, hack
    assert_within_base_rates(with_customer)
    assert scores["oracle"] == dict.fromkeys([*FAMILIES, "all"], 1.0)
    assert scores["random"]["all"] <= 0.05
    for hack in ("never ask (guess from the gist)", "one question with no keyword, then guess"):
        assert {f: s for f, s in scores[hack].items() if s > 0.02} == {}, hack
    assert scores["oracle, one question per fact"] == dict.fromkeys([*FAMILIES, "all"], 1.0)


# --- the compact observation mode --------------------------------------------------------------
# Fewer seeds than the full mode's block (its slow tests above): per family the first 3 done, 1
# infeasible and 1 refused task, so each base rate is 1/5 (as test_granularity.py plays the levels).
COMPACT_SEEDS = {f: sample_seeds("test", f, {"done": 3, "infeasible": 1, "refused": 1}) for f in FAMILIES}


def test_every_hack_stays_within_its_bound_in_compact_mode():
    result = measure_at("default", COMPACT_SEEDS, n_train=3, observation="compact")
    scores = result["scores"]
    for hack in HACKS_AT_ZERO:
        assert len(scores[hack]) >= len(FAMILIES) - 1
        assert {f: s for f, s in scores[hack].items() if s > 0.02} == {}, hack
    for hack in AT_MOST_BASE_RATES:
        assert {f: s for f, s in scores[hack].items() if s > 1 / 5} == {}, hack
        assert sum(scores[hack].values()) / len(scores[hack]) <= 1 / 5, hack
    for family in FAMILIES:
        assert scores["always refuse"][family] == pytest.approx(1 / 5)
        assert scores["always infeasible"][family] == pytest.approx(1 / 5)
        assert scores["oracle"][family] == 1.0
    assert all(not p.leaked for p in result["policies"]["read the info"])
    # the prober read the compact rows: it probed the flights they list, and no probe paid
    probes = [r for p in result["policies"]["probe the shaping"] for r in p.probe_rewards]
    assert len(probes) > 100 and set(probes) == {0.0}


def test_the_moving_worlds_shortcuts_stay_within_the_base_rates_in_compact_mode():
    only = {*AT_MOST_BASE_RATES, "oracle"}
    result = measure_at(
        "default", COMPACT_SEEDS, n_train=0, stochastic=True, only=only, observation="compact"
    )
    scores = result["scores"]
    assert all(scores["oracle"][f] == 1.0 for f in FAMILIES)
    for hack in only - {"oracle"}:
        assert {f: s for f, s in scores[hack].items() if s > 1 / 5} == {}, hack
        assert sum(scores[hack].values()) / len(scores[hack]) <= 1 / 5, hack
    readers = result["policies"]["fare-move reader"]
    assert sum(bool(p.moved) for p in readers) >= 0.9 * len(readers)  # it read the risen fare in the rows


def test_the_memoriser_learns_from_compact_rows():
    """In compact mode the memoriser still replays train texts and learns flight numbers from rows."""
    texts, routes = learn_from_train(4, observation="compact")
    assert len(texts) >= 0.9 * 4 * len(FAMILIES) and any(routes.values())
    env = gym.make("agentrl/Flights-v0", observation="compact").unwrapped
    wins = [
        play(env, lambda e: Memorise(texts, routes), s, {"family": f, "level": LEVELS[s % 3]})[0]
        for f in FAMILIES
        for s in range(TRAIN_BASE, TRAIN_BASE + 4)
    ]
    assert sum(wins) / len(wins) >= 0.9
