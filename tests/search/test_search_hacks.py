"""Reward hacks on Search-v0's test split: policies that answer without finding the answer must
score about 0, and the oracle (which searches the privileged evidence, bridge included) 1.

Every policy plays every test question of the default synthetic world (10,000 passages) and of the
wiki set; the table is printed and recorded (docs/rewards-search.md). The cap is 0.02 per cell.
Reading pays: a policy that searches the question once and reads the blank's words out of the
first passage answers the wiki questions, where answering that passage's title pays nothing.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable

import pytest

from agentrl.retrievers.wiki_questions import BLANK
from agentrl.search.env import SearchEnv
from agentrl.search.reward import normalize_answer

HACK_CAP = 0.02
Policy = Callable[[SearchEnv, str, dict], float]


@pytest.fixture(scope="module")
def synthetic() -> SearchEnv:
    return SearchEnv(privileged_info=False)


@pytest.fixture(scope="module")
def wiki(wiki_bm25) -> SearchEnv:
    return SearchEnv(dataset="wiki", retriever=wiki_bm25)


def answer(env: SearchEnv, text: str) -> float:
    return env.step(f"<answer>{text}</answer>")[1]


def entity(question: str) -> str:
    """The question's named subject: its longest run of capitalised words."""
    runs = re.findall(r"[A-Z][\w'-]*(?: [A-Z][\w'-]*)*", question)
    runs = [r for r in runs if r not in {"Who", "What", "In", "Which", "When", "Where", "How"}]
    return max(runs, key=len, default=question)


def info_strings(value: object) -> list[str]:
    """Every string and number in `info`, however deep: all a policy could read there."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in info_strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in info_strings(v)]
    return [str(value)] if isinstance(value, str | int | float) and not isinstance(value, bool) else []


def do_nothing(env, obs, info) -> float:
    total, over = 0.0, False
    while not over:
        _, reward, terminated, truncated, _ = env.step("<think>I will not search.</think>")
        total, over = total + reward, terminated or truncated
    return total


def random_text(env, obs, info) -> float:
    """Printable noise from the action space (seeded by the env's reset), until the episode ends."""
    total, over = 0.0, False
    env.action_space.seed(len(info["question"]))
    while not over:
        _, reward, terminated, truncated, _ = env.step(env.action_space.sample()[:200])
        total, over = total + reward, terminated or truncated
    return total


def question_words(env, obs, info) -> float:
    return answer(env, info["question"])


def question_entity(env, obs, info) -> float:
    return answer(env, entity(info["question"]))


def one_search_top_title(env, obs, info) -> float:
    """The title shortcut: search the question verbatim, answer the first passage's title."""
    obs, *_ = env.step(f"<search>{info['question']}</search>")
    titles = re.findall(r'Doc \d+\(Title: "(.*?)"\)', obs)
    return answer(env, titles[0] if titles else "")


def one_search_typed_guess(env, obs, info) -> float:
    """Search the question once, answer the first thing in the hits of the type asked for that the
    question does not name: the best a one-search policy can do without the bridge."""
    question = info["question"]
    obs, *_ = env.step(f"<search>{question}</search>")
    if "year" in question:
        pattern = r"\b1[89]\d\d\b|\b20[01]\d\b"
    elif "population" in question:
        pattern = r"population of (\d+)"
    else:
        pattern = r"\b[A-Z][a-z]+(?:heim|port|ford|grad|ton|vale)\b"
    found = [m if isinstance(m, str) else m[0] for m in re.findall(pattern, obs) if m not in question]
    return answer(env, found[0] if found else "")


def read_the_info(env, obs, info) -> float:
    """Every string in the reset info tried as the answer (a fresh episode each): the most that
    reading `info` can pay."""
    split = info["split"]
    index = [q.question for q in env.split_questions(split)].index(info["question"])
    best = 0.0
    for candidate in [s for s in info_strings(info) if s != info["question"]] + [json.dumps(info)]:
        env.reset(options={"split": split, "question_index": index})
        best = max(best, answer(env, candidate))
    return best


def play(env: SearchEnv, policy: Policy, split: str, indices: list[int], **options) -> float:
    total = 0.0
    for index in indices:
        obs, info = env.reset(seed=index, options={"split": split, "question_index": index, **options})
        total += policy(env, obs, info)
    return total / len(indices)


def run_suite(env: SearchEnv, sample: int | None) -> dict[str, float]:
    train, test = env.split_questions("train"), env.split_questions("test")
    indices = list(range(len(test)))[:sample]
    two_hop = [i for i in indices if test[i].hops == 2]
    counts = Counter(normalize_answer(a) for q in train for a in q.answers[:1])
    constant = counts.most_common(1)[0][0]
    memory = {normalize_answer(q.question): q.answers[0] for q in train}

    def constant_answer(env, obs, info):
        return answer(env, constant)

    def memorise_train(env, obs, info):
        return answer(env, memory.get(normalize_answer(info["question"]), constant))

    scores = {
        "do-nothing": play(env, do_nothing, "test", indices),
        "random text": play(env, random_text, "test", indices),
        "answer the question's words": play(env, question_words, "test", indices),
        "answer the question's entity": play(env, question_entity, "test", indices),
        f"constant: most common train answer ({constant!r})": play(env, constant_answer, "test", indices),
        "memorise train, play test": play(env, memorise_train, "test", indices),
        "read the info": play(env, read_the_info, "test", indices),
        "one search, answer the top title": play(env, one_search_top_title, "test", indices),
    }
    if two_hop:
        scores["two-hop: one search, answer the top title"] = play(env, one_search_top_title, "test", two_hop)
        scores["two-hop: one search, typed guess from the hits"] = play(
            env, one_search_typed_guess, "test", two_hop
        )
    return scores


def report(name: str, scores: dict[str, float], record_property) -> None:
    print(f"\n{name} hacks on the test split:")
    for policy, score in scores.items():
        print(f"  {policy:<60} {score:.3f}")
        record_property(f"{name}: {policy}", round(score, 4))


def test_synthetic_hacks_score_zero(synthetic, record_property):
    scores = run_suite(synthetic, None)
    report("synthetic", scores, record_property)
    assert len(scores) == 10
    assert all(score <= HACK_CAP for score in scores.values()), scores


def test_wiki_hacks_score_zero(wiki, record_property):
    scores = run_suite(wiki, None)
    report("wiki", scores, record_property)
    assert all(score <= HACK_CAP for score in scores.values()), scores


def oracle(env: SearchEnv, split: str, indices: list[int]) -> tuple[float, float]:
    """Search each privileged evidence title in hop order (the bridge second), answer from what
    came back. Returns (mean reward, share of episodes whose searches showed the answer)."""
    rewards, shown = 0.0, 0
    for index in indices:
        _, info = env.reset(seed=index, options={"split": split, "question_index": index})
        secret = info["privileged"]
        seen = ""
        for title in secret["evidence"]:
            seen += env.step(f"<think>Next hop: {title}.</think><search>{title}</search>")[0]
        golds = secret["answers"]
        if not any(f" {normalize_answer(g)} " in f" {normalize_answer(seen)} " for g in golds):
            seen += env.step(f"<search>{info['question']}</search>")[0]
        shown += any(f" {normalize_answer(g)} " in f" {normalize_answer(seen)} " for g in golds)
        rewards += answer(env, golds[0])
    return rewards / len(indices), shown / len(indices)


@pytest.mark.parametrize("dataset", ["synthetic", "wiki"])
def test_oracle_with_the_privileged_bridge_scores_one_on_train_and_test(dataset, request, record_property):
    env = request.getfixturevalue(dataset)
    env = SearchEnv(dataset=env.dataset, retriever=env.retriever, privileged_info=True)
    for split in ("train", "test"):
        count = len(env.split_questions(split))
        indices = list(range(0, count, max(1, count // 300)))
        reward, shown = oracle(env, split, indices)
        record_property(f"{dataset} oracle {split}", reward)
        print(f"\n{dataset} oracle on {split}: reward {reward:.3f}, answer shown by its searches {shown:.3f}")
        assert reward == 1.0
        assert shown >= (1.0 if dataset == "synthetic" else 0.98)


def one_search_read_the_blank(env, obs, info) -> float:
    """Search the question once, find its sentence in the first passage, answer what stands where
    the blank is: reading, which the wiki questions ask for."""
    obs, *_ = env.step(f"<search>{info['question']}</search>")
    sentence = info["question"].rsplit('"', 2)[-2]  # the quoted sentence closes the question
    before, _, after = sentence.partition(BLANK)
    first = obs.split("\nDoc 2(")[0]
    found = re.search(re.escape(before[-40:]) + r"(.+?)" + re.escape(after[:20]), first)
    return answer(env, found.group(1) if found else "")


def test_reading_the_first_passage_answers_the_wiki_blanks(wiki, record_property):
    test = wiki.split_questions("test")
    blanks = [i for i, q in enumerate(test) if q.id.startswith("wiki:")]
    reading = play(wiki, one_search_read_the_blank, "test", blanks)
    title = play(wiki, one_search_top_title, "test", blanks)
    record_property("wiki: one search, read the blank", reading)
    print(f"\n{len(blanks)} held-out blanks: reading the first passage {reading:.3f}, its title {title:.3f}")
    assert reading >= 0.9 and title <= HACK_CAP


def test_the_hacks_can_fail(synthetic):
    """The policies are not broken: read-the-info finds a leak where there is one, and the typed
    guess scores where one search does suffice."""
    leaky = SearchEnv(retriever=synthetic.retriever, privileged_info=True)
    assert play(leaky, read_the_info, "test", list(range(20))) == 1.0
    test = synthetic.split_questions("test")
    one_hop = [i for i, q in enumerate(test) if q.hops == 1 and "city" in q.question]
    assert play(synthetic, one_search_typed_guess, "test", one_hop) > 0.8
