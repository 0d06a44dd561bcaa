"""Search-v0's cross-team contracts: train/test splits by question, `info["task_id"]`, and no
privileged information in `info` unless the operator asks for it."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from agentrl.retrievers.datasets import Question
from agentrl.search.env import SearchEnv
from agentrl.search.reward import normalize_answer
from agentrl.search.splits import TEST_PERCENT, split_of, split_questions, task_id

WORLD = {"world_seed": 7, "world_passages": 600}
PRIVILEGED_KEYS = {"answers", "gold_answers", "evidence", "hops", "question_id", "privileged"}


@pytest.fixture(scope="module")
def wiki_env(wiki_bm25) -> SearchEnv:
    return SearchEnv(dataset="wiki", retriever=wiki_bm25)


@pytest.mark.parametrize("source", ["synthetic", "wiki"])
def test_splits_are_disjoint_by_question_and_cover_the_set(source, request):
    env = request.getfixturevalue("wiki_env") if source == "wiki" else SearchEnv()
    train, test = env.split_questions("train"), env.split_questions("test")
    train_texts = {normalize_answer(q.question) for q in train}
    test_texts = {normalize_answer(q.question) for q in test}
    assert not train_texts & test_texts
    assert len(train_texts) == len(train) and len(test_texts) == len(test)  # no repeated texts either
    share = len(test) / (len(train) + len(test))
    print(f"\n{source}: {len(train)} train / {len(test)} test questions ({share:.3f} test)")
    assert abs(share - TEST_PERCENT / 100) < 0.03


@pytest.mark.parametrize("source", ["synthetic", "wiki"])
def test_held_out_questions_share_no_passage_with_train(source, request):
    """Held-out in content: a test question's first evidence passage backs no train question, and
    in the wiki set (one question per passage, per answer) no passage and no answer is on both sides."""
    env = request.getfixturevalue("wiki_env") if source == "wiki" else SearchEnv()
    train, test = env.split_questions("train"), env.split_questions("test")
    assert not {q.evidence[0] for q in train} & {q.evidence[0] for q in test}
    if source == "wiki":
        assert not {e for q in train for e in q.evidence} & {e for q in test for e in q.evidence}
        train_answers = {normalize_answer(a) for q in train for a in q.answers}
        assert not train_answers & {normalize_answer(a) for q in test for a in q.answers}


def test_the_split_depends_on_the_text_alone():
    # the same text lands on the same side whatever its id, case, punctuation or neighbours
    texts = [f"In which year was Company {i} founded?" for i in range(400)]
    sides = [split_of(t) for t in texts]
    assert [split_of(t.upper().replace("?", " ?")) for t in texts] == sides
    questions = [Question(str(i), t, ("x",)) for i, t in enumerate(texts)]
    reordered = split_questions(questions[::-1], "test")
    assert {q.question for q in reordered} == {q.question for q in split_questions(questions, "test")}
    with pytest.raises(ValueError, match="split must be one of"):
        split_questions(questions, "validation")


def test_resets_draw_only_from_their_split():
    train_env = gym.make("agentrl/Search-v0", **WORLD).unwrapped
    test_env = gym.make("agentrl/Search-v0", split="test", **WORLD).unwrapped
    test_texts = {q.question for q in test_env.split_questions("test")}
    for seed in range(60):
        _, info = train_env.reset(seed=seed)
        assert info["question"] not in test_texts and info["split"] == "train"
        _, info = test_env.reset(seed=seed)
        assert info["question"] in test_texts and info["split"] == "test"
        _, info = train_env.reset(seed=seed, options={"split": "test"})
        assert info["question"] in test_texts and info["split"] == "test"
    with pytest.raises(ValueError, match="split must be one of"):
        SearchEnv(split="dev", **WORLD)


def test_task_ids_are_stable_distinct_and_opaque():
    env = SearchEnv(**WORLD)
    ids = {}
    for split in ("train", "test"):
        for index, question in enumerate(env.split_questions(split)):
            _, info = env.reset(seed=0, options={"split": split, "question_index": index})
            assert info["question"] == question.question
            ids[info["task_id"]] = question
            assert info["task_id"] == task_id(env.source_key, question)
            assert normalize_answer(question.answers[0]) not in info["task_id"].split()
    assert len(ids) == len(env.questions) + len(env.split_questions("test"))  # every task its own id
    # same seed, options and split: the same id, in a fresh env too
    again = SearchEnv(**WORLD)
    assert env.reset(seed=5)[1]["task_id"] == again.reset(seed=5)[1]["task_id"]
    # another world, another task, even where a question text repeats
    other = SearchEnv(world_seed=8, world_passages=600)
    assert other.reset(seed=5)[1]["task_id"] not in ids


def test_info_has_no_privileged_keys_and_no_gold_unless_the_operator_asks():
    env = SearchEnv(max_turns=1, **WORLD)
    assert "privileged_info" in SearchEnv.operator_kwargs
    for seed in range(30):
        _, info = env.reset(seed=seed)
        infos = [info]
        golds = env.question.answers
        if seed % 2:
            infos.append(env.step("<search>company</search>")[4])
            infos.append(env.step("<search>more</search>")[4])  # truncated: the episode ends unanswered
        else:
            infos.append(env.step("<answer>wrong</answer>")[4])
        for item in infos:
            assert not PRIVILEGED_KEYS & set(item)
            dump = f" {normalize_answer(json.dumps(item))} "
            assert not any(f" {normalize_answer(g)} " in dump for g in golds), item
    privileged = SearchEnv(privileged_info=True, **WORLD)
    _, info = privileged.reset(seed=3)
    assert info["privileged"]["answers"] == list(privileged.question.answers)
    assert info["privileged"]["evidence"] == list(privileged.question.evidence)
