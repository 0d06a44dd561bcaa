"""What an exec gives back: output within its cap (the omitted-bytes marker counted inside it), bytes
that are not UTF-8 shown as U+FFFD as documented, and no notice of another command's killed job."""

from __future__ import annotations

import importlib.util
import json
import random

import pytest

from agentrl.sandbox_server.agent import HERE

CAPS = (2, 3, 4, 7, 16, 31, 40, 60, 64, 100, 257, 1000, 4096, 65536)


def agent_lib():
    """The agent's own lib.py (program text for the sandbox, standard library only), loaded here."""
    spec = importlib.util.spec_from_file_location("agentrl_agent_lib_under_test", HERE / "lib.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def as_json(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode()) - 2


def streams() -> dict[str, bytes]:
    rng = random.Random(0)
    return {
        "text": b"x" * 200_000,
        "binary": rng.randbytes(200_000),
        "control": bytes(range(32)) * 6000,
        "unicode": "é✓ ".encode() * 30_000,
        "lines": b"".join(b"%d\n" % i for i in range(40_000)),
    }


@pytest.mark.parametrize("cap", CAPS)
def test_kept_output_and_its_marker_fit_the_cap_as_json(cap):
    lib = agent_lib()
    for name, data in {**streams(), "exact": b"a" * cap, "one over": b"a" * (cap + 1)}.items():
        capture = lib.Capture(cap)
        for i in range(0, len(data), 6000):  # as the pipes deliver it
            capture.add(data[i : i + 6000])
        text, truncated = capture.text()
        assert as_json(text) <= cap, (name, as_json(text))
        assert len(text) <= cap and len(text.encode()) <= cap, name
        assert truncated == (text.encode() != data), name
        if truncated and cap >= 100:  # room for the marker: it says how much was left out
            assert "bytes omitted]...\n" in text, name


@pytest.mark.docker
def test_every_cap_holds_in_a_sandbox_tiny_ones_too(sandbox):
    for cap in (2, 3, 40, 64, 1000, 65536):
        result = sandbox.exec(
            "head -c 200000 /dev/zero | tr '\\0' x; head -c 100000 /dev/urandom >&2", max_output_bytes=cap
        )
        assert (result.stdout_bytes, result.stderr_bytes, result.truncated) == (200_000, 100_000, True)
        for stream in (result.stdout, result.stderr):
            assert len(stream) <= cap and as_json(stream) <= cap, (cap, len(stream))
        assert result.stdout.startswith("x"), cap
    kept = sandbox.exec("head -c 200000 /dev/zero | tr '\\0' x", max_output_bytes=65536).stdout
    head, marker, tail = kept.partition("\n...[")
    assert marker and set(head) == {"x"} and tail.endswith("x")
    assert len(head) + len(tail.split("]...\n")[1]) + int(tail.split(" ")[0]) == 200_000


@pytest.mark.docker
def test_output_that_is_not_utf8_is_text_with_replacement_characters(sandbox):
    """As documented (docs/sandbox.md, "Output"): stdout and stderr are text; each byte that is not
    part of valid UTF-8 becomes U+FFFD, and the byte counts are of the bytes the command wrote."""
    result = sandbox.exec("printf 'A\\377\\376B\\303\\251'; printf '\\200' >&2")
    assert result.stdout == "A\ufffd\ufffdBé" and result.stdout_bytes == 6
    assert result.stderr == "\ufffd" and result.stderr_bytes == 1
    assert sandbox.exec("printf '\\377' | base64").stdout == "/w==\n"  # exact bytes: encode them


@pytest.mark.docker
def test_a_killed_background_job_leaves_no_notice_in_the_next_command(sandbox):
    """The agent kills what a command leaves running once it ends; bash's report of that job's death
    ("Killed") belongs to no command, and the next one's stderr stays its own."""
    for leftover in ("sleep 100 &", "sleep 100 & sleep 101 &", "(sleep 102; true) &"):
        assert sandbox.exec(leftover).status == "ok"
        after = sandbox.exec("echo next >&2")
        assert after.stderr == "next\n", (leftover, after.stderr)
