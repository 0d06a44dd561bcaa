"""The tool-call parser: every malformed call becomes a message, never an exception."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from agentrl.core import ParsedCall, ParseFailure, parse_tool_calls, tool_call
from agentrl.core.parsing import decode_call


def test_single_call_with_arguments():
    [call] = parse_tool_calls('hi <tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>')
    assert call == ParsedCall("f", {"x": 1})


@given(
    st.from_regex(r"[a-z_]{1,12}", fullmatch=True),
    st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True),
                    st.one_of(st.integers(-10**6, 10**6), st.booleans(),
                              st.text(st.characters(exclude_categories=("Cs",)), max_size=20)), max_size=4),
)
def test_a_written_call_reads_back_as_itself(name, arguments):
    """`tool_call` is `parse_tool_calls`' inverse: scripted policies, oracles and tests write calls
    with it, so what they write must be what the env reads."""
    assert parse_tool_calls(tool_call(name, **arguments)) == [ParsedCall(name, arguments)]


def test_args_spelling_and_string_arguments_are_accepted():
    calls = parse_tool_calls(
        '<tool_call>{"name":"search_flights","args":{"from":"PEK","to":"SHA"}}</tool_call>'
        '<tool_call>{"name": "g", "arguments": "{\\"y\\": 2}"}</tool_call>'
        '<tool_call>{"type": "function", "function": {"name": "h", "arguments": {}}}</tool_call>'
    )
    assert calls == [
        ParsedCall("search_flights", {"from": "PEK", "to": "SHA"}),
        ParsedCall("g", {"y": 2}),
        ParsedCall("h", {}),
    ]


def test_bad_json_is_explained():
    [failure] = parse_tool_calls('<tool_call>{"name": "f", </tool_call>')
    assert isinstance(failure, ParseFailure)
    assert "not valid JSON" in failure.message


def test_missing_name_and_wrong_argument_shape():
    no_name, bad_args = parse_tool_calls(
        '<tool_call>{"arguments": {}}</tool_call><tool_call>{"name": "f", "arguments": [1]}</tool_call>'
    )
    assert "no 'name'" in no_name.message
    assert "must be a JSON object" in bad_args.message


def test_unclosed_call_is_reported_after_complete_ones():
    calls = parse_tool_calls('<tool_call>{"name": "f"}</tool_call> <tool_call>{"name": "g"}')
    assert calls[0] == ParsedCall("f", {})
    assert isinstance(calls[1], ParseFailure) and "never closed" in calls[1].message


def test_too_many_calls_are_capped():
    text = '<tool_call>{"name": "f"}</tool_call>' * 5
    calls = parse_tool_calls(text, max_calls=3)
    assert len(calls) == 4 and isinstance(calls[-1], ParseFailure)


def test_no_call_gives_empty_list():
    assert parse_tool_calls("I think I should search first.") == []


@given(st.text(max_size=300))
def test_parser_never_raises(text):
    for item in parse_tool_calls(text):
        assert isinstance(item, ParsedCall | ParseFailure)


# text made mostly of the tags and their pieces, so that calls open, close, nest and run unclosed
_TAGGY = st.lists(st.sampled_from(["<tool_call>", "</tool_call>", "<tool_", "call>", "</", '{"name": "f"}',
                                   '{"name": "g", "arguments": {"x": [1]}}', "x", " ", "\n"]),
                  max_size=12).map("".join) | st.text(max_size=120)


@given(_TAGGY)
def test_calls_are_found_as_the_lazy_pattern_finds_them(text):
    """The parser scans with `str.find`; what it finds is what `<tool_call>(.*?)</tool_call>`
    (the spec of a call) matches, with one failure for an opening tag left unclosed."""
    pattern = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
    expected: list[ParsedCall | ParseFailure] = []
    end = 0
    for match in pattern.finditer(text):
        expected.append(decode_call(match.group(1)))
        end = match.end()
    if "<tool_call>" in text[end:]:
        expected.append(ParseFailure("a <tool_call> was opened but never closed with </tool_call>"))
    assert parse_tool_calls(text, max_calls=100) == expected


def test_junk_json_is_a_failure_that_names_it():
    cases = {
        '{"name": "f", "arguments": {"n": ' + "7" * 5000 + "}}": "64-bit range",
        '{"name": "f", "arguments": {"n": 9223372036854775808}}': "64-bit range",
        '{"name": "f", "arguments": {"n": NaN}}': "NaN is not a JSON number",
        '{"name": "f", "arguments": {"n": 2e308}}': "out of range",
        '{"name": "f", "arguments": ' + "[" * 30_000 + "}": "nests deeper",
        '{"name": "f\\udc00"}': "lone surrogate",
        '{"name": "f\ud800"}': "lone surrogate",
        '{"name": "f", "arguments": "{\\"n\\": Infinity}"}': "Infinity is not a JSON number",
    }
    for body, expected in cases.items():
        [failure] = parse_tool_calls(f"<tool_call>{body}</tool_call>")
        assert isinstance(failure, ParseFailure) and expected in failure.message, (body[:60], failure)
        failure.message.encode("utf-8")
    [edge] = parse_tool_calls(
        '<tool_call>{"name": "f", "arguments": {"n": -9223372036854775808, "x": 1e308}}</tool_call>'
    )
    assert edge == ParsedCall("f", {"n": -(2**63), "x": 1e308})
