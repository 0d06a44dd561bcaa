"""What a Code-v0 spec computes, as opposed to how it is worded: its outputs on a fixed set of probe
inputs per argument domain (the behaviour fingerprint), and the one-line fix of a bug.

Specs in different words can name one function ("rotate left by 2, then sum" is "sum"), so a hash of
a spec's text cannot keep the splits apart in what they ask. The split of a spec is instead a hash of
its fingerprint (`behaviour_split`), and every test task also grades each function on all the probes
of its domain. A train function of that domain that passes every hidden case of a test function
therefore returns the test function's outputs on every probe: it has the test function's fingerprint,
hence its split, which is test. So no train reference solves a test function, whatever its words or
its program (a function of another domain takes other kinds of arguments; tests/code_envs/
test_code_envs_heldout.py calls every train reference on every test task's cases, and none passes).

The probes are inputs of the test split (`content_split("case", ...)`), drawn once from a fixed seed:
no train task grades one, and train tasks carry none of them.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import random
import string
from dataclasses import replace
from functools import cache
from typing import Any

from agentrl.code_envs.code_specs import Spec, canonical, normalize_program
from agentrl.code_envs.tasks import content_split
from agentrl.code_envs.vocab import WORDS

CANDIDATES = 40  # drawn per domain; the test-split half of them are the probes


def _phrase(rng: random.Random) -> str:
    """Words in mixed case with digits, punctuation, brackets and runs of spaces or letters."""
    pieces = []
    for _ in range(rng.randint(1, 7)):
        kind = rng.randrange(5)
        if kind == 0:
            pieces.append(rng.choice(WORDS).title() + rng.choice(WORDS).title())
        elif kind == 1:
            pieces.append(rng.choice(WORDS).upper() if rng.random() < 0.3 else rng.choice(WORDS))
        elif kind == 2:
            pieces.append(rng.choice(string.ascii_letters) * rng.randint(2, 4))
        elif kind == 3:
            pieces.append("".join(rng.choices("()[]{}<>ab", k=rng.randint(2, 8))))
        else:
            pieces.append(
                "".join(rng.choices(string.ascii_letters + string.digits + ",.!-", k=rng.randint(1, 6)))
            )
    return rng.choice((" ", "  ", "")).join(pieces) + rng.choice(("", " ", "!"))


def _nested(rng: random.Random, depth: int) -> list:
    return [
        _nested(rng, depth - 1)
        if depth and rng.random() < 0.4
        else rng.choice([rng.randint(0, 9), rng.choice(WORDS)])
        for _ in range(rng.randint(0, 4))
    ]


def _intervals(rng: random.Random) -> list[list[int]]:
    """Start/end pairs, some of them touching (an end equal to another's start)."""
    out: list[list[int]] = []
    for _ in range(rng.randint(1, 7)):
        start = out[-1][1] if out and rng.random() < 0.3 else rng.randint(0, 30)
        out.append([start, start + rng.randint(0, 6)])
    rng.shuffle(out)
    return out


def _candidate(domain: str, rng: random.Random) -> tuple[Any, ...]:
    if domain == "text":
        return (_phrase(rng),)
    if domain == "count":
        return (rng.choice((rng.randint(1, 30), rng.randint(31, 160))),)
    if domain == "ints":
        return ([rng.randint(-30, 30) for _ in range(rng.randint(0, 14))],)
    if domain == "intervals":
        return (_intervals(rng),)
    if domain == "nested":
        return (_nested(rng, 4),)
    if domain == "words":
        return (
            " ".join("".join(rng.choices("abcdeAB", k=rng.randint(1, 6))) for _ in range(30)),
            rng.randint(1, 5),
        )
    raise ValueError(f"no probes for the domain {domain!r}")


@cache
def probes(domain: str) -> tuple[tuple[Any, ...], ...]:
    """The probe inputs of a domain: the test-split ones among CANDIDATES fixed draws."""
    rng = random.Random(f"probes/{domain}")
    drawn = {canonical(list(args)): args for args in (_candidate(domain, rng) for _ in range(CANDIDATES))}
    return tuple(args for key, args in drawn.items() if content_split("case", key) == "test")


@cache
def _probe_calls(domain: str) -> tuple[tuple[tuple[Any, ...], str | None], ...]:
    """Each probe, with its JSON text where it holds a list (parsed afresh for each call, so a function
    that mutates its argument cannot change the probe)."""
    return tuple(
        (args, json.dumps(args) if any(isinstance(a, list) for a in args) else None)
        for args in probes(domain)
    )


def fingerprint(source: str, name: str, domain: str) -> str:
    """A hash of what the function returns on its domain's probes, as canonical JSON (an exception is
    recorded as its type name, as `code_specs.run` does)."""
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # generated here from our templates, never the agent's code
    function, outputs = namespace[name], []
    for args, text in _probe_calls(domain):
        try:
            outputs.append(function(*(json.loads(text) if text else args)))
        except Exception as exc:
            outputs.append({"raised": type(exc).__name__})
    return hashlib.sha256(canonical(outputs).encode()).hexdigest()


def behaviour_split(spec: Spec, source: str | None = None) -> str:
    """The split of every program computing what `source` (by default the spec's reference) computes
    on the probes of the spec's domain."""
    return content_split("behaviour", fingerprint(source or spec.source, spec.name, spec.domain))


def with_probes(spec: Spec, split: str) -> Spec:
    """`spec` with the inputs of `split` only, and in the test split all the probes of its domain."""
    inputs = {canonical(list(args)): args for args in spec.inputs}
    kept = {key: args for key, args in inputs.items() if content_split("case", key) == split}
    if split == "test":
        kept |= {canonical(list(args)): args for args in probes(spec.domain)}
    return replace(spec, inputs=tuple(kept.values()))


def fix_of(source: str, buggy: str) -> str:
    """The lines `buggy` changes in `source` (and what they become), names normalised: the fix asked for."""
    old, new = buggy.splitlines(), source.splitlines()
    changed = [
        "\n".join(old[i1:i2]) + "\n=>\n" + "\n".join(new[j1:j2])
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
        if tag != "equal"
    ]
    return normalize_program("\n\n".join(changed))
