"""The function specs Code-v0's tasks are made of: a docstring, a reference implementation, test
inputs and a plausible bug, each parameterised by a seeded RNG so variants differ in substance.

Expected outputs are never written by hand: they come from running the reference here, when the
task is built.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Spec:
    name: str  # the function's name
    doc: str  # what it must do, as the agent reads it
    source: str  # reference implementation (a complete `def`)
    inputs: tuple[tuple[Any, ...], ...]  # argument tuples for the hidden tests
    bug: tuple[str, str]  # (old, new) text replacement that breaks `source`

    def signature(self) -> str:
        return self.source.split("\n", 1)[0]

    def stub(self) -> str:
        return f'{self.signature()}\n    """{self.doc}"""\n    raise NotImplementedError\n'

    def buggy(self) -> str:
        old, new = self.bug
        if old not in self.source:
            raise ValueError(f"bug pattern of {self.name} not found")
        return self.source.replace(old, new, 1)


def _words(rng: random.Random, n: int) -> str:
    return " ".join("".join(rng.choices("abcde", k=rng.randint(1, 6))) for _ in range(n))


def caesar(rng: random.Random) -> Spec:
    k = rng.randint(1, 25)
    texts = tuple(
        (s,) for s in ["", "abc xyz", "Hello, World!", "Zebra-42", _words(rng, 6).title(), "MiXeD cAsE"]
    )
    return Spec(
        "shift_letters",
        f"Shift every ASCII letter {k} places forward in the alphabet, wrapping z->a and "
        "keeping case; leave every other character unchanged.",
        f"def shift_letters(text: str) -> str:\n    out = []\n    for ch in text:\n"
        f"        if 'a' <= ch <= 'z':\n            out.append(chr((ord(ch) - 97 + {k}) % 26 + 97))\n"
        f"        elif 'A' <= ch <= 'Z':\n            out.append(chr((ord(ch) - 65 + {k}) % 26 + 65))\n"
        "        else:\n            out.append(ch)\n    return ''.join(out)\n",
        texts,
        ("% 26 + 65", "% 26 + 97"),
    )


def run_length(rng: random.Random) -> Spec:
    sep = rng.choice(["", ":", "x"])
    cases = tuple((s,) for s in ["", "a", "aaabcc", "abc", "zzzzzzzzzzzz", "".join(rng.choices("ab", k=15))])
    return Spec(
        "run_length",
        f"Run-length encode a string: each maximal run of one character becomes the "
        f"character, then {sep!r}, then the run length (e.g. 'aab' -> 'a{sep}2b{sep}1'); '' -> ''.",
        "def run_length(s: str) -> str:\n    out, i = [], 0\n    while i < len(s):\n        j = i\n"
        "        while j < len(s) and s[j] == s[i]:\n            j += 1\n"
        f"        out.append(f'{{s[i]}}{sep}{{j - i}}')\n        i = j\n    return ''.join(out)\n",
        cases,
        ("j - i}", "j - i - 1}"),
    )


def fizz(rng: random.Random) -> Spec:
    a, b = rng.sample([2, 3, 4, 5, 7], 2)
    wa, wb = rng.sample(["Fizz", "Buzz", "Bang", "Pop", "Zap"], 2)
    return Spec(
        "fizz",
        f"Return a list of strings for 1..n: '{wa}{wb}' for multiples of both {a} and {b}, "
        f"'{wa}' for multiples of {a}, '{wb}' for multiples of {b}, else the number as a string.",
        f"def fizz(n: int) -> list:\n    out = []\n    for i in range(1, n + 1):\n"
        f"        if i % {a} == 0 and i % {b} == 0:\n            out.append('{wa}{wb}')\n"
        f"        elif i % {a} == 0:\n            out.append('{wa}')\n"
        f"        elif i % {b} == 0:\n            out.append('{wb}')\n        else:\n"
        "            out.append(str(i))\n    return out\n",
        ((0,), (1,), (a * b,), (a * b + 3,), (rng.randint(40, 60),)),
        ("range(1, n + 1)", "range(1, n)"),
    )


def moving_average(rng: random.Random) -> Spec:
    k = rng.randint(2, 4)
    cases = [([],), ([1.0],), ([1, 2, 3, 4, 5],)] + [
        ([rng.randint(-9, 9) for _ in range(rng.randint(k, 12))],) for _ in range(3)
    ]
    return Spec(
        "moving_average",
        f"Averages of every window of {k} consecutive numbers, in order, each rounded "
        f"to 3 decimals; a list shorter than {k} gives [].",
        f"def moving_average(xs: list) -> list:\n    return [round(sum(xs[i:i + {k}]) / {k}, 3) "
        f"for i in range(len(xs) - {k} + 1)]\n",
        tuple(cases),
        (f"len(xs) - {k} + 1", f"len(xs) - {k}"),
    )


def balanced(rng: random.Random) -> Spec:
    pairs = rng.choice(["()[]", "()[]{}", "()<>", "{}[]"])
    o, c = pairs[0::2], pairs[1::2]
    pool = pairs + "ab"
    cases = [
        "",
        o[0] + c[0],
        o[0] + o[-1] + c[-1] + c[0],
        o[0] + o[-1] + c[0] + c[-1],
        c[0],
        o[0],
        "a" + o[-1] + "b",
    ]
    cases += ["".join(rng.choices(pool, k=8)) for _ in range(3)]
    return Spec(
        "balanced",
        f"Whether the brackets {pairs} in the string are balanced and properly nested; other "
        "characters are ignored.",
        f"def balanced(s: str) -> bool:\n    stack = []\n    for ch in s:\n        if ch in {o!r}:\n"
        f"            stack.append({c!r}[{o!r}.index(ch)])\n        elif ch in {c!r}:\n"
        "            if not stack or stack.pop() != ch:\n                return False\n"
        "    return not stack\n",
        tuple((s,) for s in cases),
        ("    return not stack", "    return True"),
    )


def merge_intervals(rng: random.Random) -> Spec:
    touching = rng.choice([True, False])
    op = "<=" if touching else "<"
    rule = (
        "intervals that overlap or touch (end == next start)"
        if touching
        else "intervals that overlap (touching ones, end == next start, stay separate)"
    )
    cases = [([],), ([[1, 3]],), ([[1, 3], [3, 5]],), ([[5, 6], [1, 2], [2, 4]],), ([[1, 10], [2, 3]],)]
    for _ in range(3):
        iv = []
        for _ in range(rng.randint(2, 6)):
            s = rng.randint(0, 20)
            iv.append([s, s + rng.randint(0, 5)])
        cases.append((iv,))
    return Spec(
        "merge_intervals",
        f"Given [start, end] pairs, return the merged list sorted by start, merging {rule}.",
        "def merge_intervals(intervals: list) -> list:\n    out = []\n"
        "    for s, e in sorted(intervals):\n"
        f"        if out and s {op} out[-1][1]:\n            out[-1][1] = max(out[-1][1], e)\n"
        "        else:\n            out.append([s, e])\n    return out\n",
        tuple(cases),
        ("max(out[-1][1], e)", "e"),
    )


def top_words(rng: random.Random) -> Spec:
    m = rng.randint(2, 4)
    cases = [("", 3), ("a bb bb ccc ccc ccc", 2), ("The the THE cat, cat! dog.", 5)]
    cases += [(_words(rng, 30), rng.randint(1, 4)) for _ in range(3)]
    return Spec(
        "top_words",
        f"The k most frequent words of at least {m} letters (words are runs of letters, "
        "compared lowercased), as [word, count] pairs, most frequent first, ties alphabetical.",
        "def top_words(text: str, k: int) -> list:\n    import re\n    from collections import Counter\n"
        f"    words = [w for w in re.findall('[a-z]+', text.lower()) if len(w) >= {m}]\n"
        "    ranked = sorted(Counter(words).items(), key=lambda p: (-p[1], p[0]))\n"
        "    return [[w, c] for w, c in ranked[:k]]\n",
        tuple(cases),
        ("(-p[1], p[0])", "(-p[1],)"),
    )


def roman(rng: random.Random) -> Spec:
    nums = (1, 4, 9, 14, 40, 90, 400, 1994, 2024, 3999, rng.randint(1, 3999), rng.randint(1, 3999))
    return Spec(
        "to_roman",
        "Convert 1 <= n <= 3999 to a Roman numeral using subtractive notation (IV, IX, XL...).",
        "def to_roman(n: int) -> str:\n    table = [(1000, 'M'), (900, 'CM'), (500, 'D'), (400, 'CD'), "
        "(100, 'C'), (90, 'XC'), (50, 'L'), (40, 'XL'), (10, 'X'), (9, 'IX'), (5, 'V'), (4, 'IV'), "
        "(1, 'I')]\n    out = ''\n    for value, sym in table:\n        while n >= value:\n"
        "            out += sym\n            n -= value\n    return out\n",
        tuple((n,) for n in nums),
        ("(900, 'CM'), ", ""),
    )


def flatten(rng: random.Random) -> Spec:
    depth = rng.randint(1, 3)
    cases = (
        ([],),
        ([1, [2, [3, [4, [5]]]]],),
        ([[1, 2], [3], []],),
        ([[[["x"]]], "y"],),
        ([1, [2, [3]], [[4]]],),
    )
    return Spec(
        "flatten",
        f"Flatten nested lists by at most {depth} level(s): lists nested deeper than that stay "
        "lists. Non-list items are kept as they are.",
        f"def flatten(items: list, depth: int = {depth}) -> list:\n    out = []\n    for x in items:\n"
        "        if isinstance(x, list) and depth > 0:\n            out.extend(flatten(x, depth - 1))\n"
        "        else:\n            out.append(x)\n    return out\n",
        cases,
        ("flatten(x, depth - 1)", "flatten(x, depth)"),
    )


def digit_sum(rng: random.Random) -> Spec:
    base = rng.choice([2, 3, 7, 8, 16])
    nums = (0, 1, base - 1, base, base**3 + 1, rng.randint(10, 10**6), rng.randint(10, 10**6))
    return Spec(
        "digit_sum",
        f"The sum of the digits of n >= 0 written in base {base}.",
        f"def digit_sum(n: int) -> int:\n    total = 0\n    while n > 0:\n        total += n % {base}\n"
        f"        n //= {base}\n    return total\n",
        tuple((n,) for n in nums),
        ("while n > 0", "while n > 1"),
    )


def snake(rng: random.Random) -> Spec:
    sep = rng.choice(["_", "-", "."])
    cases = ("", "simple", "camelCase", "HTTPServer", "getHTTPResponseCode", "already" + sep + "done", "A")
    return Spec(
        "to_snake",
        f"Convert CamelCase or camelCase to lowercase words joined by {sep!r}; a run of capitals "
        "is one word followed by a new word when a lowercase letter follows (HTTPServer -> "
        f"http{sep}server).",
        "def to_snake(name: str) -> str:\n    import re\n"
        "    s = re.sub('([A-Z]+)([A-Z][a-z])', r'\\1 \\2', name)\n"
        "    s = re.sub('([a-z0-9])([A-Z])', r'\\1 \\2', s)\n"
        f"    return {sep!r}.join(s.lower().split())\n",
        tuple((c,) for c in cases),
        ("s.lower()", "s"),
    )


def chunk(rng: random.Random) -> Spec:
    size = rng.randint(2, 4)
    fill = rng.choice([0, None, "-"])
    cases = (
        ([],),
        (list(range(size)),),
        (list(range(size + 1)),),
        (list(string.ascii_lowercase[: rng.randint(3, 11)]),),
    )
    return Spec(
        "chunk",
        f"Split a list into consecutive chunks of {size}; pad the last chunk with {fill!r} to full length.",
        f"def chunk(xs: list) -> list:\n    out = []\n    for i in range(0, len(xs), {size}):\n"
        f"        part = list(xs[i:i + {size}])\n        part += [{fill!r}] * ({size} - len(part))\n"
        "        out.append(part)\n    return out\n",
        cases,
        (f"({size} - len(part))", "0"),
    )


SPECS = (
    caesar,
    run_length,
    fizz,
    moving_average,
    balanced,
    merge_intervals,
    top_words,
    roman,
    flatten,
    digit_sum,
    snake,
    chunk,
)


def expected_outputs(spec: Spec) -> list[Any]:
    """Run the reference on the hidden inputs; JSON round-trip so tuples and lists compare alike."""
    import json

    namespace: dict[str, Any] = {}
    exec(spec.source, namespace)  # our own reference code, never the agent's
    fn = namespace[spec.name]
    return [json.loads(json.dumps(fn(*args))) for args in spec.inputs]
