"""The function specs Code-v0's tasks are made of, each drawn from a seeded RNG: a randomly named
function and argument, a docstring with drawn parameters, a reference implementation, random test
inputs around hand-picked edge cases, and a few plausible bugs.

Expected outputs are never written by hand: they come from running the reference here, on the host,
when the task is built.
"""

from __future__ import annotations

import builtins
import itertools
import json
import keyword
import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentrl.code_envs.vocab import ARG_NAMES, WORDS, func_name


@dataclass(frozen=True)
class Spec:
    name: str  # the function's name
    doc: str  # what it must do, as the agent reads it
    source: str  # reference implementation (a complete `def`)
    inputs: tuple[tuple[Any, ...], ...]  # argument tuples for the tests
    bugs: tuple[tuple[str, str], ...]  # (old, new) replacements, each breaking `source`
    domain: str  # the kind of argument(s) it takes: which probe inputs of `code_probes` apply

    def signature(self) -> str:
        return self.source.split("\n", 1)[0]

    def stub(self) -> str:
        return f'{self.signature()}\n    """{self.doc}"""\n    raise NotImplementedError\n'

    def buggy(self, bug: tuple[str, str]) -> str:
        old, new = bug
        if old not in self.source:
            raise ValueError(f"bug pattern {old!r} of {self.name} not found")
        return self.source.replace(old, new, 1)


def normalize_doc(doc: str) -> str:
    """A spec as compared across tasks: case and spacing ignored."""
    return " ".join(doc.lower().split())


# A string literal (kept as it is), or a name not preceded by a dot (attributes are kept).
_TOKEN = re.compile(r"""'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|(?<![.\w])[A-Za-z_]\w*""")
_KEPT = frozenset(keyword.kwlist) | frozenset(dir(builtins))


def normalize_program(source: str) -> str:
    """A program as compared across tasks: every name in it that is not a keyword, a builtin or an
    attribute numbered in order of appearance (functions, parameters, variables, imports), and
    whitespace runs folded, so two programs that differ only in names and spacing normalise alike."""
    names: dict[str, str] = {}

    def rename(token: re.Match[str]) -> str:
        text = token.group()
        if text[0] in "'\"" or text in _KEPT:
            return text
        return names.setdefault(text, f"v{len(names)}")

    return " ".join(_TOKEN.sub(rename, source).split())


def canonical(value: Any) -> str:
    """A JSON value as compared across the host and the container: keys sorted."""
    return json.dumps(value, sort_keys=True)


def run(source: str, name: str, inputs: tuple[tuple[Any, ...], ...]) -> list[Any]:
    """Outputs of our own generated code (the reference or a buggy copy), JSON round-tripped so that
    tuples and lists compare alike; an exception is recorded as its type name."""
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # generated here from our templates, never the agent's code
    outputs = []
    for args in inputs:
        try:
            outputs.append(json.loads(json.dumps(namespace[name](*json.loads(json.dumps(args))))))
        except Exception as exc:
            outputs.append({"raised": type(exc).__name__})
    return outputs


def _text(rng: random.Random, alphabet: str, low: int, high: int) -> str:
    return "".join(rng.choices(alphabet, k=rng.randint(low, high)))


def caesar(rng: random.Random) -> Spec:
    k, fn, a = rng.randint(1, 25), func_name(rng, "shifted"), rng.choice(ARG_NAMES)
    texts = ["", "abc xyz", "Hello, World!", "Zebra-42"] + [
        _text(rng, string.ascii_letters + " ,.!-0123456789", 3, 20) for _ in range(20)
    ]
    return Spec(
        fn,
        f"Shift every ASCII letter of the string {k} places forward in the alphabet, wrapping z->a and "
        "keeping case; leave every other character unchanged.",
        f"def {fn}({a}: str) -> str:\n    out = []\n    for ch in {a}:\n"
        f"        if 'a' <= ch <= 'z':\n            out.append(chr((ord(ch) - 97 + {k}) % 26 + 97))\n"
        f"        elif 'A' <= ch <= 'Z':\n            out.append(chr((ord(ch) - 65 + {k}) % 26 + 65))\n"
        "        else:\n            out.append(ch)\n    return ''.join(out)\n",
        tuple((t,) for t in texts),
        (
            ("% 26 + 65", "% 26 + 97"),
            (f"97 + {k}) % 26", f"97 + {k}) % 25"),
            ("elif 'A' <= ch", "elif 'B' <= ch"),
        ),
        "text",
    )


def run_length(rng: random.Random) -> Spec:
    sep, fn, a = rng.choice(["", ":", "x", "-", "*", "/"]), func_name(rng, "rle"), rng.choice(ARG_NAMES)
    count_first = rng.random() < 0.5
    piece = f"f'{{j - i}}{sep}{{{a}[i]}}'" if count_first else f"f'{{{a}[i]}}{sep}{{j - i}}'"
    example = f"'2{sep}a1{sep}b'" if count_first else f"'a{sep}2b{sep}1'"
    texts = ["", "a", "aaabcc", "abc"] + [
        _text(rng, rng.choice(["ab", "abc", "xyz", "pq"]), 1, 16) for _ in range(20)
    ]
    order = (
        "the run length, then " + repr(sep) + ", then the character"
        if count_first
        else (f"the character, then {sep!r}, then the run length")
    )
    return Spec(
        fn,
        f"Run-length encode a string: each maximal run of one character becomes {order} "
        f"(e.g. 'aab' -> {example}); '' -> ''.",
        f"def {fn}({a}: str) -> str:\n    out, i = [], 0\n    while i < len({a}):\n        j = i\n"
        f"        while j < len({a}) and {a}[j] == {a}[i]:\n            j += 1\n"
        f"        out.append({piece})\n        i = j\n    return ''.join(out)\n",
        tuple((t,) for t in texts),
        (
            ("{j - i}", "{j - i - 1}"),
            ("            j += 1", "            j += 2"),
            ("        i = j", "        i = j + 1"),
        ),
        "text",
    )


# Divisor pairs of which neither divides the other: else one rule never applies, and its word is a no-op.
FIZZ_DIVISORS = [(x, y) for x, y in itertools.permutations([2, 3, 4, 5, 6, 7, 11], 2) if x % y and y % x]


def fizz(rng: random.Random) -> Spec:
    x, y = rng.choice(FIZZ_DIVISORS)
    wa, wb = rng.sample(["Fizz", "Buzz", "Bang", "Pop", "Zap", "Ding"], 2)
    fn, a = func_name(rng, "fizz"), rng.choice(ARG_NAMES)
    ns = sorted({0, 1, x * y, x * y + 1, *(rng.randint(2, 60) for _ in range(20))})
    return Spec(
        fn,
        f"Return a list of strings for 1..n: '{wa}{wb}' for multiples of both {x} and {y}, "
        f"'{wa}' for multiples of {x} only, '{wb}' for multiples of {y} only, else the number as a string.",
        f"def {fn}({a}: int) -> list:\n    out = []\n    for i in range(1, {a} + 1):\n"
        f"        if i % {x} == 0 and i % {y} == 0:\n            out.append('{wa}{wb}')\n"
        f"        elif i % {x} == 0:\n            out.append('{wa}')\n"
        f"        elif i % {y} == 0:\n            out.append('{wb}')\n        else:\n"
        "            out.append(str(i))\n    return out\n",
        tuple((n,) for n in ns),
        (
            (f"range(1, {a} + 1)", f"range(1, {a})"),
            (f"{x} == 0 and", f"{x} == 0 or"),
            ("append(str(i))", "append(str(i + 1))"),
        ),
        "count",
    )


MEANINGFUL_DIGITS = {2: 1, 3: 3, 4: 2, 5: 1}  # decimals of sum / k for integers (3: any of 1..3)


def moving_average(rng: random.Random) -> Spec:
    k, fn, a = rng.randint(2, 5), func_name(rng, "window_avg"), rng.choice(ARG_NAMES)
    # an average of k integers has at most MEANINGFUL_DIGITS[k] decimals: rounding to more is a no-op
    digits = rng.randint(1, MEANINGFUL_DIGITS[k])
    cases = [([],), ([1.0],), ([1, 2, 3, 4, 5],)] + [
        ([rng.randint(-20, 20) for _ in range(rng.randint(k, 14))],) for _ in range(20)
    ]
    return Spec(
        fn,
        f"Averages of every window of {k} consecutive numbers, in order, each rounded "
        f"to {digits} decimals; a list shorter than {k} gives [].",
        f"def {fn}({a}: list) -> list:\n    return [round(sum({a}[i:i + {k}]) / {k}, {digits}) "
        f"for i in range(len({a}) - {k} + 1)]\n",
        tuple(cases),
        ((f"len({a}) - {k} + 1", f"len({a}) - {k}"), (f"i + {k}]", f"i + {k - 1}]"), (f", {digits})", ")")),
        "ints",
    )


def balanced(rng: random.Random) -> Spec:
    pairs, fn, a = (
        rng.choice(["()[]", "()[]{}", "()<>", "{}[]", "[]<>"]),
        func_name(rng, "nesting"),
        rng.choice(ARG_NAMES),
    )
    o, c = pairs[0::2], pairs[1::2]
    cases = [
        "",
        o[0] + c[0],
        o[0] + o[-1] + c[-1] + c[0],
        o[0] + o[-1] + c[0] + c[-1],
        c[0],
        "a" + o[-1] + "b",
    ]
    for _ in range(18):  # mostly balanced, some broken
        text = ""
        for _ in range(rng.randint(1, 4)):
            inner = [rng.randrange(len(o)) for _ in range(rng.randint(1, 4))]
            text += (
                "".join(o[i] for i in inner) + _text(rng, "ab", 0, 2) + "".join(c[i] for i in reversed(inner))
            )
        if rng.random() < 0.3:
            cut = rng.randrange(len(text))
            text = text[:cut] + text[cut + 1 :]
        cases.append(text)
    return Spec(
        fn,
        f"The deepest nesting of the brackets {pairs} in the string when they are balanced and properly "
        "nested (0 when there are none), else -1; other characters are ignored.",
        f"def {fn}({a}: str) -> int:\n    stack, deepest = [], 0\n    for ch in {a}:\n"
        f"        if ch in {o!r}:\n"
        f"            stack.append({c!r}[{o!r}.index(ch)])\n            deepest = max(deepest, len(stack))\n"
        f"        elif ch in {c!r}:\n"
        "            if not stack or stack.pop() != ch:\n                return -1\n"
        "    return -1 if stack else deepest\n",
        tuple((s,) for s in cases),
        (
            ("return -1 if stack else deepest", "return deepest"),
            ("if not stack or", "if stack and"),
            ("stack.pop() != ch", "stack[-1] != ch"),
            ("max(deepest, len(stack))", "max(deepest, len(stack) - 1)"),
        ),
        "text",
    )


def merge_intervals(rng: random.Random) -> Spec:
    touching, fn, a = rng.choice([True, False]), func_name(rng, "merged"), rng.choice(ARG_NAMES)
    op = "<=" if touching else "<"
    rule = (
        "intervals that overlap or touch (end == next start)"
        if touching
        else ("intervals that overlap (touching ones, end == next start, stay separate)")
    )
    cases = [([],), ([[1, 3]],), ([[1, 3], [3, 5]],), ([[5, 6], [1, 2], [2, 4]],), ([[1, 10], [2, 3]],)]
    for _ in range(18):
        starts = [rng.randint(0, 30) for _ in range(rng.randint(2, 7))]
        cases.append(([[s, s + rng.randint(0, 6)] for s in starts],))
    return Spec(
        fn,
        "Given [start, end] pairs, return the merged list of [start, end] pairs sorted by start, merging "
        f"{rule}.",
        f"def {fn}({a}: list) -> list:\n    out = []\n    for s, e in sorted({a}):\n"
        f"        if out and s {op} out[-1][1]:\n            out[-1][1] = max(out[-1][1], e)\n"
        "        else:\n            out.append([s, e])\n    return out\n",
        tuple(cases),
        (
            ("max(out[-1][1], e)", "e"),
            (f"sorted({a})", a),
            (f"s {op} out[-1][1]", f"s {'<' if touching else '<='} out[-1][1]"),
        ),
        "intervals",
    )


def top_words(rng: random.Random) -> Spec:
    m, fn, a = rng.randint(2, 4), func_name(rng, "top_words"), rng.choice(ARG_NAMES)
    cases = [("", 3), ("a bb bb ccc ccc ccc", 2), ("The the THE cat, cat! dog.", 5)]
    cases += [(" ".join(_text(rng, "abcde", 1, 6) for _ in range(30)), rng.randint(1, 5)) for _ in range(18)]
    return Spec(
        fn,
        f"The k most frequent words of at least {m} letters (words are runs of ASCII letters, "
        "compared lowercased), as [word, count] pairs, most frequent first, ties in alphabetical order.",
        f"def {fn}({a}: str, k: int) -> list:\n    import re\n    from collections import Counter\n"
        f"    words = [w for w in re.findall('[a-z]+', {a}.lower()) if len(w) >= {m}]\n"
        "    ranked = sorted(Counter(words).items(), key=lambda p: (-p[1], p[0]))\n"
        "    return [[w, c] for w, c in ranked[:k]]\n",
        tuple(cases),
        (("(-p[1], p[0])", "(-p[1],)"), (f">= {m}]", f"> {m}]"), ("ranked[:k]", "ranked[:k - 1]")),
        "words",
    )


def roman(rng: random.Random) -> Spec:
    lower, fn, a = rng.random() < 0.5, func_name(rng, "roman"), rng.choice(ARG_NAMES)
    nums = sorted({1, 4, 9, 14, 40, 90, 400, 1994, 3999, *(rng.randint(1, 3999) for _ in range(20))})
    return Spec(
        fn,
        f"Convert 1 <= n <= 3999 to a Roman numeral using subtractive notation (IV, IX, XL...), in "
        f"{'lowercase (e.g. xiv)' if lower else 'uppercase (e.g. XIV)'}.",
        f"def {fn}({a}: int) -> str:\n    table = [(1000, 'M'), (900, 'CM'), (500, 'D'), (400, 'CD'), "
        "(100, 'C'), (90, 'XC'), (50, 'L'), (40, 'XL'), (10, 'X'), (9, 'IX'), (5, 'V'), (4, 'IV'), "
        f"(1, 'I')]\n    out = ''\n    for value, sym in table:\n        while {a} >= value:\n"
        f"            out += sym\n            {a} -= value\n    return out{'.lower()' if lower else ''}\n",
        tuple((n,) for n in nums),
        (("(900, 'CM'), ", ""), ("(4, 'IV'), ", ""), (f"while {a} >= value", f"if {a} >= value")),
        "count",
    )


def _nested(rng: random.Random, depth: int) -> list:
    out: list = []
    for _ in range(rng.randint(0, 4)):
        if depth and rng.random() < 0.5:
            out.append(_nested(rng, depth - 1))
        else:
            out.append(rng.choice([rng.randint(0, 9), rng.choice(WORDS)]))
    return out


def flatten(rng: random.Random) -> Spec:
    depth, fn, a = rng.randint(1, 3), func_name(rng, "flat"), rng.choice(ARG_NAMES)
    cases = [([],), ([1, [2, [3, [4, [5]]]]],), ([[1, 2], [3], []],), ([[[["x"]]], "y"],)]
    cases += [(_nested(rng, 4),) for _ in range(20)]
    return Spec(
        fn,
        f"Flatten nested lists by at most {depth} level(s): lists nested deeper than that stay "
        "lists. Non-list items are kept as they are.",
        f"def {fn}({a}: list, depth: int = {depth}) -> list:\n    out = []\n    for x in {a}:\n"
        f"        if isinstance(x, list) and depth > 0:\n            out.extend({fn}(x, depth - 1))\n"
        "        else:\n            out.append(x)\n    return out\n",
        tuple(cases),
        (("(x, depth - 1)", "(x, depth)"), ("depth > 0", "depth > 1"), ("out.extend(", "out.append(")),
        "nested",
    )


def digit_sum(rng: random.Random) -> Spec:
    base, fn, a = rng.choice([2, 3, 5, 7, 8, 9, 12, 16]), func_name(rng, "digit_sum"), rng.choice(ARG_NAMES)
    nums = sorted({0, 1, base - 1, base, base**3 + 1, *(rng.randint(2, 10**6) for _ in range(20))})
    return Spec(
        fn,
        f"The sum of the digits of n >= 0 written in base {base} (digits counted by their value).",
        f"def {fn}({a}: int) -> int:\n    total = 0\n    while {a} > 0:\n        total += {a} % {base}\n"
        f"        {a} //= {base}\n    return total\n",
        tuple((n,) for n in nums),
        (
            (f"while {a} > 0", f"while {a} > 1"),
            (f"{a} % {base}", f"{a} % {base + 1}"),
            ("return total", "return total - 1"),
        ),
        "count",
    )


def snake(rng: random.Random) -> Spec:
    sep, fn, a = rng.choice(["_", "-", ".", "__", "+"]), func_name(rng, "snake"), rng.choice(ARG_NAMES)
    parts = ["http", "server", "get", "value", "xml", "parse", "id", "json", "url", "load"]
    cases = ["", "simple", "camelCase", "HTTPServer", "getHTTPResponseCode", "A"] + [
        "".join(p.upper() if rng.random() < 0.2 else p.title() for p in rng.sample(parts, rng.randint(1, 4)))
        for _ in range(18)
    ]
    return Spec(
        fn,
        f"Convert CamelCase or camelCase to lowercase words joined by {sep!r}; a run of capitals "
        "is one word, followed by a new word when a capital is followed by a lowercase letter (HTTPServer -> "
        f"http{sep}server).",
        f"def {fn}({a}: str) -> str:\n    import re\n"
        f"    s = re.sub('([A-Z]+)([A-Z][a-z])', r'\\1 \\2', {a})\n"
        "    s = re.sub('([a-z0-9])([A-Z])', r'\\1 \\2', s)\n"
        f"    return {sep!r}.join(s.lower().split())\n",
        tuple((c,) for c in cases),
        (
            ("s.lower()", "s"),
            ("([A-Z]+)([A-Z][a-z])", "([A-Z])([A-Z][a-z])"),
            ("([a-z0-9])([A-Z])", "([a-z])([A-Z])"),
        ),
        "text",
    )


def chunk(rng: random.Random) -> Spec:
    size, fill = rng.randint(2, 5), rng.choice([0, None, "-", "", -1])
    fn, a = func_name(rng, "chunks"), rng.choice(ARG_NAMES)
    cases = (
        [([],), (list(range(size)),), (list(range(size + 1)),)]
        + [(list(string.ascii_lowercase[: rng.randint(1, 14)]),) for _ in range(10)]
        + [([rng.randint(0, 9) for _ in range(rng.randint(1, 12))],) for _ in range(10)]
    )
    return Spec(
        fn,
        f"Split a list into consecutive chunks of {size} (a list of lists); pad the last chunk with {fill!r} "
        "to full length.",
        f"def {fn}({a}: list) -> list:\n    out = []\n    for i in range(0, len({a}), {size}):\n"
        f"        part = list({a}[i:i + {size}])\n        part += [{fill!r}] * ({size} - len(part))\n"
        "        out.append(part)\n    return out\n",
        tuple(cases),
        (
            (f"({size} - len(part))", "0"),
            (f"range(0, len({a}), {size})", f"range(0, len({a}) - 1, {size})"),
            (f"i:i + {size}]", f"i:i + {size - 1}]"),
        ),
        "ints",
    )


SPECS: tuple[Callable[[random.Random], Spec], ...] = (
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
