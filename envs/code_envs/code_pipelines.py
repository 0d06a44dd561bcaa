"""Function specs composed from parameterised steps: a few transformations of a list of integers or
of a string, one after another, then a final result. Each step brings a phrase of the docstring, a
line of the reference implementation and wrong variants of that line (the bugs), so the number of
distinct specs grows with the product of the steps' kinds and parameters (hundreds of thousands),
where each hand-written builder of `code_specs` has a few dozen. Steps that change nothing the
function returns (`has_idle_step`) are never drawn.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from agentrl.code_envs.code_probes import probes
from agentrl.code_envs.code_specs import Spec
from agentrl.code_envs.vocab import ARG_NAMES, WORDS, func_name

MAX_STEP_DRAWS = 200  # most draws have no no-op step: never reached


@dataclass(frozen=True)
class Step:
    doc: str  # what the step does, as a clause of the docstring
    line: str  # the reference line, e.g. "xs = [x * 3 for x in xs]"
    bugs: tuple[str, ...]  # wrong variants of `line`


# --- lists of integers: each step rewrites `xs` ------------------------------------------------------
def _filter(rng: random.Random) -> Step:
    kind = rng.randrange(4)
    if kind == 0:
        d = rng.randint(2, 9)
        return Step(
            f"keep the numbers divisible by {d}",
            f"xs = [x for x in xs if x % {d} == 0]",
            (f"xs = [x for x in xs if x % {d} == 1]", f"xs = [x for x in xs if x % {d + 1} == 0]"),
        )
    if kind == 1:
        t = rng.randint(-15, 15)
        return Step(
            f"keep the numbers greater than {t}",
            f"xs = [x for x in xs if x > {t}]",
            (f"xs = [x for x in xs if x >= {t}]", f"xs = [x for x in xs if x < {t}]"),
        )
    if kind == 2:
        lo = rng.randint(-12, 8)
        hi = lo + rng.randint(2, 12)
        return Step(
            f"drop the numbers from {lo} to {hi} inclusive",
            f"xs = [x for x in xs if not {lo} <= x <= {hi}]",
            (f"xs = [x for x in xs if not {lo} < x < {hi}]", f"xs = [x for x in xs if {lo} <= x <= {hi}]"),
        )
    parity = rng.choice(("odd", "even"))
    rest = 1 if parity == "odd" else 0
    return Step(
        f"keep the {parity} numbers",
        f"xs = [x for x in xs if x % 2 == {rest}]",
        (f"xs = [x for x in xs if x % 2 == {1 - rest}]", f"xs = [x for x in xs if x % 3 == {rest}]"),
    )


def _map(rng: random.Random) -> Step:
    kind = rng.randrange(5)
    if kind == 0:
        m = rng.choice([-3, -2, 2, 3, 4, 5, 7, 10])
        return Step(
            f"multiply each number by {m}",
            f"xs = [x * {m} for x in xs]",
            (f"xs = [x * {m + 1} for x in xs]", f"xs = [x + {m} for x in xs]"),
        )
    if kind == 1:
        c = rng.choice([n for n in range(-20, 21) if n not in (0, 1, -1)])
        return Step(
            f"add {c} to each number",
            f"xs = [x + {c} for x in xs]",
            (f"xs = [x - {c} for x in xs]", f"xs = [x + {c} for x in xs[1:]]"),
        )
    if kind == 2:
        return Step(
            "replace each number by its square",
            "xs = [x * x for x in xs]",
            ("xs = [x * 2 for x in xs]", "xs = [x * abs(x) for x in xs]"),
        )
    if kind == 3:
        m = rng.randint(3, 11)
        return Step(
            f"replace each number by its remainder modulo {m} (in 0..{m - 1})",
            f"xs = [x % {m} for x in xs]",
            (f"xs = [abs(x) % {m} for x in xs]", f"xs = [x % {m - 1} for x in xs]"),
        )
    lo = rng.randint(-10, 0)
    hi = rng.randint(2, 12)
    return Step(
        f"clamp each number to the range {lo}..{hi}",
        f"xs = [min(max(x, {lo}), {hi}) for x in xs]",
        (f"xs = [min(x, {hi}) for x in xs]", f"xs = [max(min(x, {lo}), {hi}) for x in xs]"),
    )


def _order(rng: random.Random) -> Step:
    kind = rng.randrange(5)
    if kind == 0:
        down = rng.random() < 0.5
        return Step(
            f"sort them in {'descending' if down else 'ascending'} order",
            f"xs = sorted(xs, reverse={down})",
            (f"xs = sorted(xs, reverse={not down})", "xs = list(xs)"),
        )
    if kind == 1:
        return Step(
            "remove repeated numbers, keeping the first occurrence of each",
            "xs = list(dict.fromkeys(xs))",
            ("xs = sorted(set(xs))", "xs = list(dict.fromkeys(xs[::-1]))"),
        )
    if kind == 2:
        n = rng.randint(1, 6)
        return Step(
            f"keep only the first {n} numbers", f"xs = xs[:{n}]", (f"xs = xs[:{n + 1}]", f"xs = xs[{n}:]")
        )
    if kind == 3:
        n = rng.randint(1, 4)
        return Step(
            f"drop the first {n} numbers", f"xs = xs[{n}:]", (f"xs = xs[{n + 1}:]", f"xs = xs[:-{n}]")
        )
    r = rng.randint(1, 4)
    return Step(
        f"rotate the list left by {r} places (as a cycle; an empty list stays empty)",
        f"xs = xs[{r} % len(xs):] + xs[:{r} % len(xs)] if xs else xs",
        (f"xs = xs[{r}:] + xs[:{r}]", f"xs = xs[-{r} % len(xs):] + xs[:-{r} % len(xs)] if xs else xs"),
    )


LIST_FINALS = (
    ("the resulting list", "return xs", ("return xs[1:]", "return sorted(xs)")),
    (
        "the sum of the resulting numbers",
        "return sum(xs)",
        ("return sum(xs[1:])", "return sum(xs) - len(xs)"),
    ),
    ("how many numbers remain", "return len(xs)", ("return len(xs) - 1", "return len(set(xs))")),
    (
        "the largest remaining number, or None when none remain",
        "return max(xs) if xs else None",
        ("return max(xs[1:]) if xs[1:] else None", "return min(xs) if xs else None"),
    ),
    (
        "the alternating sum x0 - x1 + x2 - ... of the resulting numbers",
        "return sum(x if i % 2 == 0 else -x for i, x in enumerate(xs))",
        ("return sum(x if i % 2 == 1 else -x for i, x in enumerate(xs))", "return sum(xs[::2])"),
    ),
)


def _int_list(rng: random.Random) -> list[int]:
    return [rng.randint(-30, 30) for _ in range(rng.randint(0, 12))]


# --- strings: each step rewrites `s` ------------------------------------------------------------------
def _text_step(rng: random.Random) -> Step:
    kind = rng.randrange(7)
    if kind == 0:
        case = rng.choice(("lower", "upper", "swapcase"))
        say = {"lower": "lowercase it", "upper": "uppercase it", "swapcase": "swap the case of every letter"}
        others = [c for c in ("lower", "upper", "swapcase") if c != case]
        return Step(say[case], f"s = s.{case}()", tuple(f"s = s.{c}()" for c in others))
    if kind == 1:
        x, y = rng.sample(string.ascii_lowercase, 2)
        return Step(
            f"replace every '{x}' with '{y}'",
            f"s = s.replace({x!r}, {y!r})",
            (f"s = s.replace({y!r}, {x!r})", f"s = s.replace({x!r}, {y!r}, 1)"),
        )
    if kind == 2:
        chars = "".join(sorted(rng.sample("aeioulnrst", rng.randint(2, 4))))
        return Step(
            f"remove every character that is one of {chars!r}",
            f"s = ''.join(ch for ch in s if ch not in {chars!r})",
            (
                f"s = ''.join(ch for ch in s if ch in {chars!r})",
                f"s = ''.join(ch for ch in s if ch not in {chars[1:]!r})",
            ),
        )
    if kind == 3:
        return Step(
            "reverse the order of its words (words are separated by whitespace; join them with one space)",
            "s = ' '.join(s.split()[::-1])",
            ("s = ' '.join(s.split())", "s = s[::-1]"),
        )
    if kind == 4:
        n = rng.randint(3, 6)
        return Step(
            f"keep only the words of at least {n} characters (join them with one space)",
            f"s = ' '.join(w for w in s.split() if len(w) >= {n})",
            (
                f"s = ' '.join(w for w in s.split() if len(w) > {n})",
                f"s = ' '.join(w for w in s.split() if len(w) <= {n})",
            ),
        )
    if kind == 5:
        r = rng.randint(1, 5)
        return Step(
            f"rotate it left by {r} characters (as a cycle; '' stays '')",
            f"s = s[{r} % len(s):] + s[:{r} % len(s)] if s else s",
            (f"s = s[{r}:]", f"s = s[-{r} % len(s):] + s[:-{r} % len(s)] if s else s"),
        )
    sep = rng.choice(("-", "_", "+", ".", "/"))
    return Step(
        f"join its words with {sep!r} instead of whitespace",
        f"s = {sep!r}.join(s.split())",
        (f"s = {sep!r}.join(s.split(' '))", f"s = s.replace(' ', {sep!r}, 1)"),
    )


def _text_finals(rng: random.Random) -> tuple[str, str, tuple[str, ...]]:
    ch = rng.choice("aeiost")
    return rng.choice(
        (
            ("the resulting string", "return s", ("return s.strip('a')", "return s[:-1]")),
            (
                "the length of the resulting string",
                "return len(s)",
                ("return len(s.split())", "return len(s) - 1"),
            ),
            (
                f"how many times {ch!r} occurs in the resulting string",
                f"return s.count({ch!r})",
                (f"return s.lower().count({ch!r})", f"return s.count({ch!r}) - 1"),
            ),
            (
                "the list of the resulting string's words",
                "return s.split()",
                ("return s.split(' ')", "return [s]"),
            ),
        )
    )


def _phrase(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(0, 6))]
    words = [w.upper() if rng.random() < 0.15 else w.title() if rng.random() < 0.3 else w for w in words]
    return rng.choice((" ", "  ", " ")).join(words) + rng.choice(
        ("", "", " ", " " + rng.choice(string.ascii_letters))
    )


def _source(fn: str, a: str, var: str, steps: list[Step], ret: str, annotation: str) -> str:
    body = (
        [f"    {var} = {'list(' + a + ')' if var == 'xs' else a}"]
        + [f"    {s.line}" for s in steps]
        + [f"    {ret}"]
    )
    return f"def {fn}({a}: {annotation}):\n" + "\n".join(body) + "\n"


@cache
def _statement(var: str, line: str) -> Callable[[Any], Any]:
    """A step's line (`xs = ...`) or a final line (`return ...`) as a function of `var`, compiled once."""
    namespace: dict[str, Any] = {}
    exec(f"def f({var}):\n    {line}\n    return {var}\n", namespace)  # our own step templates
    return namespace["f"]


def _chain(var: str, lines: list[str], value: Any) -> Any:
    """What the lines, run one after another on `value`, return (an exception: its type name)."""
    try:
        for line in lines:
            value = _statement(var, line)(value)
        return value
    except Exception as exc:
        return ("raised", type(exc).__name__)


def has_idle_step(steps: list[Step], ret: str, var: str, domain: str) -> bool:
    """Whether leaving out one of `steps` changes nothing the function returns on the probes (a rotation
    before a sum, a sort before a maximum, 'keep the even numbers' after 'keep those divisible by 4'):
    such a step is a no-op, and its clause would make a new docstring of an old function.

    The steps are run as compiled statements rather than as whole programs (one `exec` per variant
    would be most of the cost of drawing a spec), each variant only until its first differing output;
    they rebind `var` and never mutate it, so the probes are shared, and outputs (ints, strings, lists
    of them) compare as Python values."""
    start, values = (
        f"{var} = list({var})" if var == "xs" else f"{var} = {var}",
        [v for (v,) in probes(domain)],
    )
    lines = [start, *(s.line for s in steps), ret]
    whole = [_chain(var, lines, v) for v in values]
    return any(
        all(_chain(var, lines[: i + 1] + lines[i + 2 :], v) == w for v, w in zip(values, whole, strict=True))
        for i in range(len(steps))
    )


def _compose(
    rng: random.Random,
    noun: str,
    kind: str,
    var: str,
    steps: list[Step],
    final: tuple[str, str, tuple[str, ...]],
    inputs: list[tuple],
    annotation: str,
    domain: str,
) -> Spec:
    fn, a = func_name(rng, noun), rng.choice(ARG_NAMES)
    what, ret, ret_bugs = final
    doc = f"Given {kind}: " + "; then ".join(s.doc for s in steps) + f". Return {what}."
    bugs = tuple((f"    {s.line}\n", f"    {b}\n") for s in steps for b in s.bugs)
    bugs += tuple((f"    {ret}\n", f"    {b}\n") for b in ret_bugs)
    return Spec(fn, doc, _source(fn, a, var, steps, ret, annotation), tuple(inputs), bugs, domain)


def number_pipeline(rng: random.Random) -> Spec:
    for _ in range(MAX_STEP_DRAWS):
        makers = rng.sample((_filter, _map, _order, _filter, _map), rng.randint(2, 3))
        steps = list(dict((s.line, s) for s in (m(rng) for m in makers)).values())
        final = rng.choice(LIST_FINALS)
        if not has_idle_step(steps, final[1], "xs", "ints"):
            inputs = [([],), ([rng.randint(-30, 30)],)] + [(_int_list(rng),) for _ in range(22)]
            return _compose(rng, "numbers", "a list of integers", "xs", steps, final, inputs, "list", "ints")
    raise RuntimeError(f"every one of {MAX_STEP_DRAWS} step draws had a no-op step")  # a step bug


def text_pipeline(rng: random.Random) -> Spec:
    for _ in range(MAX_STEP_DRAWS):
        steps = list(dict((s.line, s) for s in (_text_step(rng) for _ in range(rng.randint(2, 3)))).values())
        final = _text_finals(rng)
        if not has_idle_step(steps, final[1], "s", "text"):
            inputs = [("",)] + [(_phrase(rng),) for _ in range(23)]
            return _compose(rng, "text", "a string", "s", steps, final, inputs, "str", "text")
    raise RuntimeError(f"every one of {MAX_STEP_DRAWS} step draws had a no-op step")  # a step bug
