"""The task distribution: texts do not repeat, splits share nothing, outcomes do not show in the text."""

import pytest
from flights_distribution import draw, lonely_templates, outcome_mix, overlap, repetition

N_SEEDS = 200  # per family, level and split, as the figures in docs/envs/flights.md


@pytest.fixture(scope="module")
def drawn():
    return {split: draw(split, N_SEEDS) for split in ("train", "test")}


@pytest.mark.slow
def test_texts_repeat_at_most_five_percent_per_family_and_level(drawn):
    for found in drawn.values():
        assert max(repetition(found).values()) <= 0.05


@pytest.mark.slow
def test_train_and_test_share_no_text_world_route_or_passenger(drawn):
    shared = overlap(drawn["train"], drawn["test"])
    assert shared == dict.fromkeys(shared, 0) and len(shared) == 5
    routes = set().union(*(w[1] for w in drawn["train"]["worlds"]))
    assert len(routes) > 40  # many routes per split, none of them in the other


@pytest.mark.slow
def test_infeasible_and_refused_requests_read_like_done_ones(drawn):
    """Every template a non-done request uses is also used by done requests of its family and level."""
    for found in drawn.values():
        assert lonely_templates(found) == {}
        mix = outcome_mix(found)
        assert 0.10 <= mix["infeasible"] / sum(mix.values()) <= 0.15
        assert 0 < mix["refused"] <= mix["infeasible"]
