"""Search-v0's wiki questions: every answer is read from inside a passage of the corpus, and is
never the title of that passage.

Two sources, both checked against the 10,033 Wikipedia leads of `wiki_corpus()`:

- FanOutQA sub-questions whose gold answer appears (after Search-R1's normalisation, as whole
  words) in the text of their own evidence passage, not in the question, and is not that passage's
  title.
- Blanks in each lead's first sentence, "<subject> is <description>.": one proper name inside the
  description (a place, a people, a work, a taxon) becomes "___", and the question gives the
  article's title and the sentence and asks what fills the blank. The blank shares no word with the
  title or the subject and appears nowhere else in the question, so the question does not give it
  away, and the passage the question finds first (the article itself) has another title: only
  reading that passage answers it.

Why not "Who or what is <description>?" answered by the title, as this set once asked: searching
the question verbatim and answering the first passage's title needs no reading at all, and paid
0.943 on the held-out questions.

No two questions share their evidence passage, their answer or their normalised text, so a split
by question text (Search-v0's) puts each passage, each answer and each question on one side only:
train and test are disjoint in content, and no constant answer ("American", "Europe") pays more
than once. Of a sentence's names the one rarest across all first sentences is blanked.
"""

from __future__ import annotations

import re
from collections import Counter

from agentrl.retrievers.base import split_title
from agentrl.retrievers.datasets import Question, fanoutqa_questions, normalize_answer

_FIRST_SENTENCE = re.compile(
    r"^(?P<subject>[^.;:()\"]{2,80}?),?\s+(?P<verb>is|was|are|were)\s+"
    r"(?P<desc>(?:a|an|the|one)\s[^;()\[\]\"]{20,240}?)\.(?=\s+[A-Z]|\s*$)"
)
# a run of capitalised words, joined by the particles names carry ("Bay of Bengal", "Ramón y Cajal")
_NAME_CHARS = r"\w'\u2019-"  # letters, apostrophes (straight and curly), hyphens
_NAME = re.compile(
    rf"(?<![{_NAME_CHARS}])[A-Z][{_NAME_CHARS}]*"
    rf"(?:\s+(?:(?:of|the|de|du|des|del|da|di|la|le|von|van|and|y|al|bin|ibn)\s+)*[A-Z][{_NAME_CHARS}]*)*"
)
_PARENTHETICAL = re.compile(r"\s*\(.*\)$")
_NAME_FILLER = frozenset(
    {"the", "a", "an", "of", "and", "in", "on", "for", "to", "de", "la", "le", "von", "van"}
)
MIN_DESCRIPTION_WORDS = 8
BLANK = "___"


def _words(text: str) -> set[str]:
    return set(normalize_answer(text).split())


def _padded(text: str) -> str:
    """Normalised text between spaces, so `in` matches whole words only."""
    return f" {normalize_answer(text)} "


def cloze_question(title: str, sentence: str) -> str:
    return (
        f'Which words fill the blank in the first sentence of the Wikipedia article "{title}"? "{sentence}"'
    )


def blanks(title: str, text: str) -> list[tuple[str, str]]:
    """Every fair (answer, question) blank of one lead's first sentence, in sentence order."""
    match = _FIRST_SENTENCE.match(text)
    if match is None:
        return []
    subject, description = match.group("subject").strip(), match.group("desc")
    base = _PARENTHETICAL.sub("", title)
    name_words = {
        w for n in {title, base, subject} for w in _words(n) if w not in _NAME_FILLER and len(w) > 2
    }
    if not _words(subject) & _words(base):
        return []  # the sentence is not about the title
    last = description.split()[-1]
    if len(description.split()) < MIN_DESCRIPTION_WORDS or (len(last) <= 3 and last[:1].isupper()):
        return []  # too short to point at one name, or cut at an abbreviation ("D. W. Griffith")
    found = []
    offset = match.start("desc")
    for name in _NAME.finditer(description):
        answer = name.group(0)
        normalised = normalize_answer(answer)
        if len(normalised) < 3 or normalised.isdigit() or _words(answer) & name_words:
            continue  # too short to be a name, or part of the title: the first hit's title would pay
        start, end = offset + name.start(), offset + name.end()
        if text[:start].rstrip().endswith("."):
            continue  # capitalised because a sentence starts there, not because it is a name
        if f" {normalised} " not in _padded(text):
            continue  # half of a word the reward reads as one (Michelson and Morley, joined by an en dash)
        sentence = f"{text[:start]}{BLANK}{text[end : match.end()]}"  # the lead's own words, verbatim
        question = cloze_question(title, sentence)
        if f" {normalised} " not in _padded(question):  # written once only: the blank gives nothing away
            found.append((answer, question))
    return found


def answerable_fanoutqa(texts: dict[str, str]) -> list[Question]:
    """FanOutQA sub-questions whose answer is in their evidence passage (`texts`: title -> text)
    and is not that passage's title."""
    out = []
    for q in fanoutqa_questions(set(texts)):
        answer = _padded(q.answers[0])
        title = q.evidence[0]
        if (
            answer.strip()
            and answer in _padded(texts[title])
            and answer not in _padded(q.question)
            and answer != _padded(title)
        ):
            out.append(Question(f"fanoutqa:{q.id}", q.question, q.answers, q.evidence, q.hops))
    return out


def wiki_questions(rows: list[dict[str, str]]) -> list[Question]:
    """The wiki questions over `rows` (`wiki_corpus()`): one per passage, one per answer.

    FanOutQA's come first; then each remaining lead gets its fair blank with the rarest name (then
    the longest) whose answer no question has yet: the blank a guess is least likely to fill."""
    texts = dict(split_title(r["contents"]) for r in rows)
    passages: set[str] = set()
    answers: set[str] = set()
    texts_seen: set[str] = set()
    out: list[Question] = []

    def take(question: Question) -> bool:
        passage, answer = question.evidence[0], normalize_answer(question.answers[0])
        text = normalize_answer(question.question)
        if passage in passages or answer in answers or text in texts_seen:
            return False
        passages.add(passage)
        answers.add(answer)
        texts_seen.add(text)
        out.append(question)
        return True

    for question in answerable_fanoutqa(texts):
        take(question)
    candidates = {title: blanks(title, text) for title, text in texts.items()}
    frequency = Counter(normalize_answer(answer) for found in candidates.values() for answer, _ in found)
    for title in sorted(candidates):
        ranked = sorted(candidates[title], key=lambda c: (frequency[normalize_answer(c[0])], -len(c[0])))
        for answer, text in ranked:
            if take(Question(f"wiki:{title}", text, (answer,), (title,))):
                break
    return out
