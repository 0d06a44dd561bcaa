"""Search-v0's questions: two-hop questions that need two searches, and wiki questions whose
answers are read inside their passage, never its title."""

from __future__ import annotations

from collections import Counter

import pytest

from agentrl.retrievers import split_title
from agentrl.retrievers.datasets import normalize_answer
from agentrl.retrievers.synthetic import generate_world
from agentrl.retrievers.wiki_questions import answerable_fanoutqa, blanks, wiki_questions


def padded(text: str) -> str:
    return f" {normalize_answer(text)} "


@pytest.fixture(scope="module")
def big_world():
    return generate_world(seed=0, passages=10_000)  # Search-v0's default world


@pytest.fixture(scope="module")
def big_world_bm25(big_world, tmp_path_factory):
    from agentrl.retrievers.bm25 import BM25Retriever

    with BM25Retriever.from_rows(big_world.passages, tmp_path_factory.mktemp("big")) as retriever:
        yield retriever


def test_two_hop_passages_are_chained_only_through_the_bridge(big_world):
    texts = dict(split_title(p["contents"]) for p in big_world.passages)
    two_hop = [q for q in big_world.questions if q.hops == 2]
    assert 0.4 < len(two_hop) / len(big_world.questions) < 0.6
    for q in two_hop:
        first, bridge = q.evidence
        assert first in q.question and bridge not in q.question
        assert bridge in texts[first]  # the first hop names the bridge...
        assert padded(q.answers[0]) not in padded(texts[first])  # ...but not the answer
        assert first not in texts[bridge]  # the answer's passage never names the question's subject
        assert padded(q.answers[0]) in padded(texts[bridge])


def test_second_hop_is_out_of_reach_of_the_question_alone(big_world, big_world_bm25, record_property):
    two_hop = [q for q in big_world.questions if q.hops == 2]
    from_question = big_world_bm25.search([q.question for q in two_hop], 10)
    from_bridge = big_world_bm25.search([q.evidence[1] for q in two_hop], 3)

    def recall(hits, hop):
        return sum(
            any(split_title(h.contents)[0] == q.evidence[hop] for h in per)
            for per, q in zip(hits, two_hop, strict=True)
        ) / len(two_hop)

    second, first, bridged = recall(from_question, 1), recall(from_question, 0), recall(from_bridge, 1)
    record_property("second_hop_recall_at_10_from_question", second)
    print(
        f"\n{len(two_hop)} two-hop questions, bm25: first-hop recall@10 from the question {first:.3f}; "
        f"second-hop recall@10 from the question {second:.3f}; "
        f"second-hop recall@3 from the bridge {bridged:.3f}"
    )
    assert second <= 0.02 and first >= 0.98 and bridged >= 0.98


def test_synthetic_answers_do_not_pile_up(big_world):
    counts = Counter(q.answers[0] for q in big_world.questions)
    assert counts.most_common(1)[0][1] / len(big_world.questions) < 0.01


def test_wiki_answers_are_read_inside_their_passage_and_are_never_its_title(wiki_rows, record_property):
    texts = dict(split_title(r["contents"]) for r in wiki_rows)
    questions = wiki_questions(wiki_rows)
    kinds = Counter(q.id.split(":")[0] for q in questions)
    record_property("wiki_questions", dict(kinds))
    print(f"\nwiki questions: {dict(kinds)}, {len(questions)} in all")
    assert kinds["wiki"] > 2000 and kinds["fanoutqa"] >= 40
    for q in questions:
        title = q.evidence[0]
        assert q.hops == 1 and len(q.evidence) == 1
        for a in q.answers:
            assert padded(a) in padded(texts[title]), q  # read inside the passage...
            assert normalize_answer(a) != normalize_answer(title), q  # ...never its title
            assert padded(a) not in padded(q.question), q  # and not given away
    # one question per passage, per answer, per text: nothing is shared, whatever the split
    assert len({q.evidence[0] for q in questions}) == len(questions)
    assert len({normalize_answer(q.answers[0]) for q in questions}) == len(questions)
    assert len({normalize_answer(q.question) for q in questions}) == len(questions)


def test_blanks_take_names_from_inside_the_first_sentence_never_the_title():
    everest = blanks(
        "Mount Everest",
        "Mount Everest is the highest mountain on Earth above sea level, on the border of two countries. "
        "It lies...",
    )
    assert everest == [
        (
            "Earth",
            'Which words fill the blank in the first sentence of the Wikipedia article "Mount Everest"? '
            '"Mount Everest is the highest mountain on ___ above sea level, on the border of two countries."',
        )
    ]
    # the lead's own words, comma and all; no name of the title (Angola) is ever the blank
    angola = blanks(
        "Angola",
        "Angola, officially the Republic of Angola, is a country on the western coast of Southern Africa. "
        "It is the second-largest Portuguese-speaking country.",
    )
    assert [a for a, _ in angola] == ["Southern Africa"]
    sentence = '"Angola, officially the Republic of Angola, is a country on the western coast of ___."'
    assert angola[0][1].endswith(sentence)
    toyota = blanks("Toyota", "Toyota is a Japanese maker of cars based in Toyota City, Aichi, Japan.")
    assert [a for a, _ in toyota] == ["Japanese", "Aichi", "Japan"]  # never "Toyota City"
    assert blanks("Paris", "Paris is a city in France.") == []  # too short to point at one name
    assert blanks("X", "No definition here at all, just words.") == []
    # a capital that starts a sentence is not a name
    assert blanks("Axiom", "The axiom is an idea of set theory that many use. Informally put, it says.") == []
    assert all("___" in q and padded(a) not in padded(q) for a, q in everest + angola + toyota)


def test_answerable_fanoutqa_drops_questions_whose_answer_is_not_in_their_evidence(wiki_rows, wiki_questions):
    texts = dict(split_title(r["contents"]) for r in wiki_rows)
    kept = answerable_fanoutqa(texts)
    print(f"\nFanOutQA: {len(wiki_questions)} with their page in the corpus, {len(kept)} answerable from it")
    assert 60 <= len(kept) < len(wiki_questions) / 4
    assert not any(normalize_answer(q.answers[0]) == normalize_answer(q.evidence[0]) for q in kept)
