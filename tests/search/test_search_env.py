"""Search-v0: Search-R1's protocol, rewards, masking spans, determinism and the Gymnasium contract."""

from __future__ import annotations

import json
import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

import agentrl
from agentrl.search.env import INVALID_ACTION, SearchEnv, render_passages
from agentrl.search.reward import answer_reward, exact_match, f1_score, normalize_answer

WORLD = {"world_seed": 7, "world_passages": 600}


def make(**kwargs) -> SearchEnv:
    return gym.make("agentrl/Search-v0", **{**WORLD, **kwargs}).unwrapped


def oracle_episode(env: SearchEnv, seed: int) -> tuple[float, list[str]]:
    """Search each gold evidence title, then answer the gold answer."""
    env.reset(seed=seed)
    question = env.question
    observations = []
    for title in question.evidence:
        obs, reward, terminated, truncated, _ = env.step(
            f"<think>I need {title}.</think><search>{title}</search>"
        )
        assert not (terminated or truncated)
        observations.append(obs)
    _, reward, terminated, _, info = env.step(
        f"<think>Found it.</think><answer>{question.answers[0]}</answer>"
    )
    assert terminated and info["em"] == 1.0
    return reward, observations


def test_oracle_scores_one_and_finds_the_answer_by_search():
    env = make()
    rewards = []
    for seed in range(40):
        reward, observations = oracle_episode(env, seed)
        rewards.append(reward)
        # the answer really is in what the searches returned
        assert normalize_answer(env.question.answers[0]) in normalize_answer(" ".join(observations))
    assert sum(rewards) / len(rewards) == 1.0


def test_no_search_guesser_scores_near_zero():
    env = make()
    guesses = ["London", "1900", "John Smith", "Paris", "France"]
    rewards = []
    for seed in range(60):
        env.reset(seed=seed)
        _, reward, terminated, _, _ = env.step(f"<answer>{guesses[seed % len(guesses)]}</answer>")
        assert terminated
        rewards.append(reward)
    assert sum(rewards) / len(rewards) < 0.05


def test_document_rendering_and_information_block():
    env = make(topk=2)
    env.reset(seed=3)
    obs, *_, info = env.step("<search>company founded</search>")
    assert obs.startswith("\n\n<information>Doc 1(Title: ") and obs.endswith("</information>\n\n")
    assert "\nDoc 2(Title: " in obs and "Doc 3" not in obs
    assert info["action"] == "search" and len(info["retrieved_ids"]) == 2
    hits = env.retriever.search(["company founded"], 2)[0]
    assert render_passages(hits).strip() in obs
    assert obs.split("Title: ")[1].startswith('"')  # the title line as Search-R1 shows it, quotes and all


def test_invalid_action_gets_search_r1_message():
    env = make()
    env.reset(seed=0)
    for bad in ["just thinking", "<search>unclosed", "<answer>x</search>", ""]:
        obs, reward, terminated, truncated, info = env.step(bad)
        assert obs == INVALID_ACTION and reward == 0.0 and info["action"] == "invalid"
        if terminated or truncated:
            break


def test_first_action_tag_wins():
    env = make()
    env.reset(seed=0)
    gold = env.question.answers[0]
    _, reward, terminated, _, info = env.step(f"<answer>{gold}</answer> <search>more</search>")
    assert terminated and reward == 1.0
    env.reset(seed=0)
    _, _, terminated, _, info = env.step(f"<search>q</search><answer>{gold}</answer>")
    assert not terminated and info["action"] == "search"


def test_max_turns_then_one_final_no_search_turn():
    env = make(max_turns=2, privileged_info=True)
    env.reset(seed=1)
    for _ in range(2):
        obs, _, terminated, truncated, info = env.step("<search>company</search>")
        assert "Doc 1" in obs and not (terminated or truncated)
    obs, reward, terminated, truncated, info = env.step("<search>company</search>")
    assert obs == "\n\n<information></information>\n\n"
    assert truncated and not terminated and reward == 0.0
    assert info["searches"] == 2 and info["privileged"]["answers"] == list(env.question.answers)
    with pytest.raises(agentrl.core.EpisodeOverError):
        env.step("<answer>x</answer>")


def test_final_turn_still_accepts_an_answer():
    env = make(max_turns=1)
    env.reset(seed=2)
    env.step("<search>anything</search>")
    _, reward, terminated, truncated, _ = env.step(f"<answer>{env.question.answers[0]}</answer>")
    assert terminated and not truncated and reward == 1.0


def test_env_spans_mark_exactly_the_environment_text():
    env = make()
    env.reset(seed=4)
    actions = [
        "<think>a</think><search>who</search>",
        "garbage",
        "<search>where</search>",
        "<answer>x</answer>",
    ]
    observations = []
    for action in actions:
        obs, *_, info = env.step(action)
        observations.append(obs)
    text = env.rollout_text
    assert text == "".join(a + o for a, o in zip(actions, observations, strict=True))
    spans = info["env_spans"]
    assert [text[s:e] for s, e in spans] == [o for o in observations if o]
    model_text = "".join(
        text[e:s] for (_, e), (s, _) in zip([(0, 0), *spans], [*spans, (len(text), 0)], strict=True)
    )
    assert model_text == "".join(actions)


def test_reward_options():
    golds = ["The Eiffel Tower", "Tour Eiffel"]
    assert normalize_answer("  The  Eiffel-Tower!! ") == "eiffeltower"
    assert normalize_answer("An apple, a day") == "apple day"
    assert exact_match("eiffel tower", golds) == 1.0 and exact_match("tower", golds) == 0.0
    assert f1_score("eiffel", golds) == pytest.approx(2 * 1 * 0.5 / 1.5)
    assert answer_reward(None, golds) == 0.0
    assert answer_reward("wrong", golds, format_score=0.2) == 0.2
    assert answer_reward("the eiffel tower", golds, format_score=0.2) == 1.0
    env = make(reward="f1", format_score=0.1)
    env.reset(seed=0, options={"question": "Where?", "answers": ["red brick house"]})
    _, reward, *_ = env.step("<answer>brick house</answer>")
    assert reward == pytest.approx(0.8)
    env.reset(seed=0, options={"question": "Where?", "answers": ["red brick house"]})
    assert env.step("<answer>nothing</answer>")[1] == pytest.approx(0.1)


def test_determinism_same_seed_same_episode():
    actions = [
        "<search>founded</search>",
        "<think>hm</think>",
        "<search>born in</search>",
        "<answer>a</answer>",
    ]

    def run(seed: int) -> list:
        env = make()
        trace = [env.reset(seed=seed)[0]]
        for action in actions:
            obs, reward, terminated, truncated, info = env.step(action)
            trace.append((obs, reward, terminated, truncated, info))
            if terminated or truncated:
                break
        return trace

    assert run(11) == run(11)
    assert run(11)[0] != run(12)[0] or run(11)[1:] != run(12)[1:]


def test_check_env_passes_without_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(make())
        env = gym.make("agentrl:agentrl/Search-v0", **WORLD)
        env.reset(seed=0)
        env.step(env.action_space.sample())
        env.close()
    assert [str(w.message) for w in caught] == []


def test_render_and_wiki_dataset(wiki_bm25):
    env = make(render_mode="ansi")
    env.reset(seed=0)
    env.step("<search>company</search>")
    assert "[assistant]\n<search>company</search>" in env.render()
    wiki = make(dataset="wiki", retriever=wiki_bm25)
    _, info = wiki.reset(seed=5)
    assert info["question"] == wiki.question.question and wiki.question.evidence


def test_remote_retriever_matches_in_process(world_server, world_bm25_dir):
    local = make(index_dir=str(world_bm25_dir))
    remote = make(retrieval_url=world_server.url)
    for env in (local, remote):
        env.reset(seed=9)
    for action in ["<search>founded company</search>", f"<search>{local.question.evidence[0]}</search>"]:
        assert local.step(action)[0] == remote.step(action)[0]


def test_retriever_outage_is_an_observation_not_a_crash():
    from support import free_port

    env = make(retrieval_url=f"http://127.0.0.1:{free_port()}")
    env.reset(seed=0)
    obs, _, terminated, truncated, info = env.step("<search>anything</search>")
    assert obs.startswith("\n\n<information>Search failed (ConnectError") and "search_error" in info
    assert not (terminated or truncated)


@settings(max_examples=60, deadline=None)
@given(
    action=st.text(max_size=200)
    | st.sampled_from(["<search>", "</answer>", "<answer></answer>", "<search></search>"])
)
def test_any_text_is_a_valid_step(action):
    env = make()
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str) and info["action"] in ("search", "answer", "invalid")
    assert 0.0 <= reward <= 1.0


@settings(max_examples=40, deadline=None)
@given(
    text=st.text(st.characters(codec=None, categories=["Cs", "Lu", "Ll", "Nd", "Zs"]), max_size=40),
    tag=st.sampled_from(["search", "answer"]),
)
def test_lone_surrogates_in_actions_never_reach_the_outside(text, tag):
    env = make()
    _, info = env.reset(seed=0, options={"question": "Who \udc80?", "answers": ["x"]})
    json.dumps(info, ensure_ascii=False).encode("utf-8")
    obs, _, _, _, info = env.step(f"<{tag}>{text}</{tag}>")
    obs.encode("utf-8")
    json.dumps(info, ensure_ascii=False).encode("utf-8")
    env.rollout_text.encode("utf-8")
