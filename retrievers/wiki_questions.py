"""Search-v0's wiki questions: every gold answer is written in the corpus it is searched over.

Two sources, both checked against the 10,033 Wikipedia leads of `wiki_corpus()`:

- FanOutQA sub-questions whose gold answer appears (after Search-R1's normalisation, as whole
  words) in the text of their own evidence passage and not in the question: 82 of the 509 whose
  page is in the corpus, 70 distinct question texts.
- Definition questions built from each lead's first sentence, "<subject> is <description>.", asked
  as "Who or what is <description>?" with the article's title as the answer. Kept only when no word
  of the title or subject appears in the description (so the question does not give the answer
  away) and the description has at least eight words (so it names one thing).

Questions are deduplicated by their normalised text, so a split by question text (Search-v0's)
cannot put one question on both sides.
"""

from __future__ import annotations

import re

from agentrl.retrievers.base import split_title
from agentrl.retrievers.datasets import Question, fanoutqa_questions, normalize_answer

_FIRST_SENTENCE = re.compile(
    r"^(?P<subject>[^.;:()\"]{2,80}?),?\s+(?P<verb>is|was|are|were)\s+"
    r"(?P<desc>(?:a|an|the|one)\s[^;()\[\]\"]{20,240}?)\.(?=\s+[A-Z]|\s*$)"
)
_PARENTHETICAL = re.compile(r"\s*\(.*\)$")
_NAME_FILLER = frozenset(
    {"the", "a", "an", "of", "and", "in", "on", "for", "to", "de", "la", "le", "von", "van"}
)
MIN_DESCRIPTION_WORDS = 8


def _words(text: str) -> set[str]:
    return set(normalize_answer(text).split())


def _padded(text: str) -> str:
    """Normalised text between spaces, so `in` matches whole words only."""
    return f" {normalize_answer(text)} "


def definition_question(title: str, text: str) -> Question | None:
    """The definition question of one lead, or None when its first sentence makes no fair one."""
    match = _FIRST_SENTENCE.match(text)
    if match is None:
        return None
    subject, verb, description = match.group("subject").strip(), match.group("verb"), match.group("desc")
    base = _PARENTHETICAL.sub("", title)
    names = {title, base, subject}
    name_words = {w for n in names for w in _words(n) if w not in _NAME_FILLER and len(w) > 2}
    if name_words & _words(description) or not _words(subject) & _words(base):
        return None  # gives the answer away, or the sentence is not about the title
    last = description.split()[-1]
    if len(description.split()) < MIN_DESCRIPTION_WORDS or (len(last) <= 3 and last[:1].isupper()):
        return None  # too vague to name one thing, or cut at an abbreviation ("U.S.")
    answers = tuple(dict.fromkeys([title, base] + ([subject] if "," not in subject else [])))
    return Question(f"wiki:{title}", f"Who or what {verb} {description}?", answers, (title,))


def answerable_fanoutqa(texts: dict[str, str]) -> list[Question]:
    """FanOutQA sub-questions whose answer is in their evidence passage (`texts`: title -> text)."""
    out = []
    for q in fanoutqa_questions(set(texts)):
        answer = _padded(q.answers[0])
        if answer.strip() and answer in _padded(texts[q.evidence[0]]) and answer not in _padded(q.question):
            out.append(Question(f"fanoutqa:{q.id}", q.question, q.answers, q.evidence, q.hops))
    return out


def wiki_questions(rows: list[dict[str, str]]) -> list[Question]:
    """Every answerable wiki question over `rows` (`wiki_corpus()`), distinct by normalised text."""
    texts = dict(split_title(r["contents"]) for r in rows)
    found = answerable_fanoutqa(texts)
    for title, text in texts.items():
        question = definition_question(title, text)
        if question is not None:
            found.append(question)
    seen: set[str] = set()
    unique = []
    for q in found:
        key = normalize_answer(q.question)
        if key not in seen:
            seen.add(key)
            unique.append(q)
    return unique
