"""Checks that judge where the agent's code is not.

Grading starts after `Sandbox.reset_processes()` has killed everything the agent started (see
`base_env`). Every check then gathers raw facts with one-shot execs (a fresh `bash -c`, clean
environment, the workspace as cwd, root-owned tools only) and computes the verdict here on the host,
from expected values that never enter the container. Nothing is written where the agent could have
planted a link: data travels on stdin and stdout.

What comes back from the container is the agent's to shape, so every parse of it is bounded
(`parse_json`: size, nesting depth, number syntax; `parse_index`: ASCII digits only) and a report
that does not parse is a `MalformedReport`: the check scores it 0 and says why in the grade's
`malformed`, which the env puts in `info["malformed_report"]`. No output can make a check raise.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentrl.code_envs.tasks import Check, Grade, all_or_nothing, malformed

if TYPE_CHECKING:
    from agentrl.sandbox_server import ExecResult, Sandbox

CHECK_TIMEOUT_S = 30.0
READ_LIMIT = 1 << 20  # bytes of an output file worth comparing; anything longer is wrong anyway
MAX_JSON_DEPTH = 64  # nesting of a JSON value read back; every expected value is far shallower
MAX_NUMBER_CHARS = 64  # characters of one JSON number; expected values have at most a few dozen
# git reads its repository's config, which the agent wrote: switch off everything in it that can
# run a program or substitute objects, and read no global or system config.
GIT = (
    "env GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_NO_REPLACE_OBJECTS=1 "
    "GIT_TERMINAL_PROMPT=0 GIT_OPTIONAL_LOCKS=0 git --no-pager --no-replace-objects "
    "-c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.pager=cat -c log.showSignature=false "
    "-c gpg.program=false -c diff.external= -c core.sshCommand=false -c protocol.allow=never"
)


class MalformedReport(ValueError):
    """Output from the container that is not what the check asked for; the check scores it 0."""


# A JSON string (escapes included), then the brackets left once strings are gone.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_BRACKETS = re.compile(r"[\[\]{}]")


def _json_number(kind: type) -> Any:
    def parse(text: str) -> Any:
        if len(text) > MAX_NUMBER_CHARS:
            raise MalformedReport(f"a number of {len(text)} characters")
        value = kind(text)
        if not math.isfinite(value):
            raise MalformedReport(f"a number out of range: {text[:20]}")
        return value

    return parse


def _no_constant(text: str) -> Any:
    raise MalformedReport(f"{text} is not a JSON value")


def parse_json(text: str, *, max_chars: int = READ_LIMIT, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Strict JSON from the container, within bounds the host can afford: at most `max_chars`
    characters and `max_depth` levels of nesting (checked before parsing, so a 5,000-deep value never
    reaches the recursive parser), numbers of at most MAX_NUMBER_CHARS characters, finite, and no
    NaN or Infinity. Raises MalformedReport for anything else."""
    if len(text) > max_chars:
        raise MalformedReport(f"{len(text)} characters of JSON, over the {max_chars} read")
    depth = 0
    for bracket in _BRACKETS.finditer(_JSON_STRING.sub("", text)):
        depth += 1 if bracket.group() in "[{" else -1
        if depth > max_depth:
            raise MalformedReport(f"JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(
            text, parse_int=_json_number(int), parse_float=_json_number(float), parse_constant=_no_constant
        )
    except MalformedReport:
        raise
    except ValueError as exc:  # JSONDecodeError, and int() past the interpreter's digit limit
        raise MalformedReport(f"not JSON: {str(exc)[:200]}") from None


_INDEX = re.compile(r"[0-9]{1,9}")  # ASCII only: str.isdigit() also accepts '²', which int() refuses


def parse_index(text: str, count: int) -> int:
    """A case number below `count` written in ASCII digits; MalformedReport otherwise."""
    if not _INDEX.fullmatch(text) or int(text) >= count:
        raise MalformedReport(f"case number {text[:20]!r} is not one of 0..{count - 1}")
    return int(text)


def oneshot(
    sandbox: Sandbox, command: str, stdin: str | None = None, timeout_s: float = CHECK_TIMEOUT_S
) -> ExecResult:
    return sandbox.exec(
        command, timeout_s=timeout_s, mode="oneshot", stdin=stdin, max_output_bytes=2 * READ_LIMIT
    )


def read_text(sandbox: Sandbox, path: str) -> str | None:
    """A workspace file's text as the agent's user reads it, or None (missing, unreadable, too big)."""
    out = oneshot(sandbox, f"head -c {READ_LIMIT + 1} -- {shlex.quote(path)}")
    if out.status != "ok" or out.truncated or len(out.stdout.encode()) > READ_LIMIT:
        return None
    return out.stdout


def normalize(text: str) -> str:
    return " ".join(text.strip().strip("`'\".").split()).lower()


def answer_is(expected: str | int, *, path: bool = False) -> Check:
    """The final answer equals `expected` (case, surrounding whitespace and quotes ignored)."""
    want = normalize(str(expected))

    def check(_: Sandbox, answer: str | None) -> Grade:
        got = normalize(answer or "")
        if path:
            got = got.removeprefix("./")
        return all_or_nothing(int(got == want), 1, f"answer {got!r}, expected {want!r}")

    return check


def json_file_equals(path: str, expected: Any) -> Check:
    """The workspace file `path` holds JSON equal to `expected` (ints and floats kept apart)."""
    want = json.dumps(expected, sort_keys=True)

    def check(sandbox: Sandbox, _: str | None) -> Grade:
        text = read_text(sandbox, path)
        if text is None:
            return all_or_nothing(0, 1, f"{path}: missing, unreadable or too big")
        try:
            got = json.dumps(parse_json(text), sort_keys=True)
        except MalformedReport as exc:
            return malformed(1, f"{path}: {exc}")
        return all_or_nothing(int(got == want), 1, f"{path}: read")

    return check


def text_file_equals(path: str, expected: str) -> Check:
    """The workspace file `path` holds `expected` (trailing whitespace of the file ignored)."""

    def check(sandbox: Sandbox, _: str | None) -> Grade:
        text = read_text(sandbox, path)
        ok = text is not None and text.rstrip() == expected.rstrip()
        return all_or_nothing(int(ok), 1, f"{path}: {text!r:.200}")

    return check


def progress(facts: Sequence[tuple[bool, bool]], detail: str = "") -> Grade:
    """A grade from (holds now, held at the start) per fact: only facts that did not hold at the
    start count toward partial credit; those that did and no longer hold are regressions."""
    return Grade(
        sum(now for now, start in facts if not start),
        sum(not start for _, start in facts),
        all(now for now, _ in facts),
        sum(not now for now, start in facts if start),
        detail,
    )


def modes_are(roots: Sequence[str], expected: dict[str, int], initial: dict[str, int]) -> Check:
    """Each file in `expected` is a regular file (not a link) with exactly that mode; files whose
    `initial` mode was already right only count when they are broken."""
    command = f"find -P {' '.join(shlex.quote(r) for r in roots)} -printf '%m\\t%y\\t%p\\n'"

    def check(sandbox: Sandbox, _: str | None) -> Grade:
        out = oneshot(sandbox, command)
        seen = {}
        for line in out.stdout.splitlines():
            mode, kind, path = [*line.split("\t", 2), "", ""][:3]
            seen[path] = (kind, mode)
        return progress(
            [(seen.get(p) == ("f", oct(m)[2:]), initial[p] == m) for p, m in expected.items()],
            f"modes: {seen}",
        )

    return check


def git_facts(sandbox: Sandbox, commands: Sequence[str]) -> list[str | None]:
    """Each git command's stdout (None when it failed), from one one-shot exec."""
    marker = "\x1eagentrl-next\x1e"
    script = "; ".join(
        f"{GIT} {c} 2>/dev/null || printf FAILED; printf {shlex.quote(marker)}" for c in commands
    )
    out = oneshot(sandbox, script)
    parts = out.stdout.split(marker)[: len(commands)]
    return [None if p.endswith("FAILED") else p for p in parts] + [None] * (len(commands) - len(parts))


def all_of(*checks: Check) -> Check:
    """Every part must pass; each counts as one check."""

    def check(sandbox: Sandbox, answer: str | None) -> Grade:
        grades = [c(sandbox, answer) for c in checks]
        return Grade(
            sum(g.passed for g in grades),
            sum(g.total for g in grades),
            all(g.solved for g in grades),
            0,
            "; ".join(g.detail for g in grades),
            "; ".join(g.malformed for g in grades if g.malformed),
        )

    return check
