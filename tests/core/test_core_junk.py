"""Junk never raises: whatever text a policy writes, `env.step` answers with an observation that
encodes as UTF-8, and the junk is named in it.

Run over Echo-v0 and over a ToolEnv whose tools take every argument shape pydantic validates
(integers, floats, lists, nested models, aliases), because junk breaks different code on each.
"""

from __future__ import annotations

import json
import math

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import AliasChoices, BaseModel, Field

from agentrl.core import ToolEnv, tool
from agentrl.core.encoding import utf8_safe


class Point(BaseModel):
    x: float
    y: float


class PlotArgs(BaseModel):
    count: int = Field(ge=0, le=1000)
    scale: float = 1.0
    tags: list[str] = Field(default_factory=list)
    points: list[Point] = Field(default_factory=list)
    origin: str = Field(default="here", validation_alias=AliasChoices("origin", "from"))


class PlotEnv(ToolEnv):
    """Sums what it is given; the total must be finite, or the tool itself would be wrong."""

    def _reset_world(self, options):
        self.total = 0.0
        return "Plot some points.", {}

    @tool("Add points to the plot.")
    def plot(self, args: PlotArgs) -> dict:
        self.total += args.count * args.scale + sum(p.x + p.y for p in args.points)
        assert math.isfinite(self.total)
        return {"total": self.total, "origin": args.origin, "tags": args.tags}

    @tool("Stop.", ends_episode=True)
    def finish(self) -> str:
        return "done"

    def _final_reward(self) -> float:
        return 1.0


def call(name: str, arguments: str) -> str:
    return f'<tool_call>{{"name": {name}, "arguments": {arguments}}}</tool_call>'


JUNK = {
    "huge integer": (call('"plot"', '{"count": ' + "9" * 5000 + "}"), "64-bit range"),
    "huge negative": (call('"plot"', '{"count": -' + "9" * 30 + "}"), "64-bit range"),
    "deep nesting": (call('"plot"', "[" * 30_000), "nests deeper"),
    "deep valid nesting": (call('"plot"', '{"tags": ' + "[" * 200 + "]" * 200 + "}"), "nests deeper"),
    "NaN": (call('"plot"', '{"count": 1, "scale": NaN}'), "NaN is not a JSON number"),
    "Infinity": (call('"plot"', '{"count": 1, "scale": -Infinity}'), "-Infinity is not a JSON number"),
    "overflowing float": (call('"plot"', '{"count": 1, "scale": 1e400}'), "out of range"),
    "lone surrogate in the name": (call('"pl\ud800ot"', "{}"), "lone surrogate"),
    "escaped surrogate in the name": (call('"pl\\udfffot"', "{}"), "lone surrogate"),
    "lone surrogate in an argument": (call('"plot"', '{"count": 1, "origin": "\udc80"}'), "lone surrogate"),
    "escaped surrogate in a key": (call('"plot"', '{"\\ud800": 1}'), "lone surrogate"),
    "escaped surrogate in string arguments": (
        call('"plot"', json.dumps('{"count": 1, "tags": ["\\ud800"]}')),
        "lone surrogate",
    ),
    "unknown argument": (
        call('"plot"', '{"count": 1, "colour": "red"}'),
        "colour: not an argument of 'plot'",
    ),
}


@pytest.mark.parametrize("case", sorted(JUNK))
def test_junk_is_an_error_observation(case):
    action, expected = JUNK[case]
    env = PlotEnv()
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    obs.encode("utf-8")
    assert expected in obs and '"error"' in obs
    assert info["invalid_calls"] == 1 and reward == 0.0 and not terminated
    # the env is unharmed: a good call still works on the next turn
    obs, *_ = env.step(call('"plot"', '{"count": 2, "from": "there"}'))
    assert '"total": 2.0' in obs and '"origin": "there"' in obs


def test_unknown_arguments_are_reported_not_dropped():
    env = gym.make("agentrl/Echo-v0")
    env.reset(seed=0)
    obs, *_, info = env.step(call('"echo"', '{"text": "hi", "loud": true, "times": 3}'))
    assert "loud: not an argument of 'echo'" in obs and "times: not an argument" in obs
    assert "it takes: text" in obs and info["calls"][0]["ok"] is False


def test_aliases_and_limits_still_pass():
    env = PlotEnv()
    env.reset(seed=0)
    limit = str(2**63 - 1)
    obs, *_ = env.step(
        call('"plot"', '{"count": 3, "scale": 0.5, "from": "x", "points": [{"x": 1, "y": 2}]}')
    )
    assert '"total": 4.5' in obs
    obs, *_ = env.step(call('"plot"', '{"count": ' + limit + "}"))
    assert "less than or equal to 1000" in obs  # a 64-bit integer reaches the schema, which judges it


def test_lone_surrogates_outside_calls_are_scrubbed_from_what_goes_back():
    env = gym.make("agentrl/Echo-v0", render_mode="ansi")
    env.reset(seed=0)
    obs, *_ = env.step('\udcff<tool_call>{"name": "echo", "arguments": {"text": "ok"}}</tool_call>')
    assert '"content": "ok"' in obs
    env.render().encode("utf-8")
    assert utf8_safe("a\ud800b\udc00") == "a\ufffdb\ufffd"


def test_non_text_actions_are_observations():
    env = gym.make("agentrl/Echo-v0")
    env.reset(seed=0)
    for action in [b"\xff\xfe", None, 3]:
        obs, reward, *_ = env.step(action)
        assert obs.startswith("Invalid action: expected text") and reward == 0.0


def junk_json() -> st.SearchStrategy[str]:
    """Text that looks like tool-call JSON, with every kind of junk mixed in."""
    atoms = (
        st.sampled_from(
            [
                "NaN",
                "Infinity",
                "-Infinity",
                "1e999",
                "9" * 400,
                "-" + "9" * 25,
                '"\\ud800"',
                '"\\udfff x"',
                "true",
                "null",
                '"echo"',
                '"plot"',
                '"finish"',
                "0",
                "-1",
                "1.5",
            ]
        )
        | st.text(max_size=12).map(json.dumps)
        | st.integers().map(str)
    )
    return st.recursive(
        atoms,
        lambda inner: (
            st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]")
            | st.lists(
                st.tuples(
                    st.sampled_from(['"text"', '"count"', '"scale"', '"tags"', '"points"', '"x"', '"from"']),
                    inner,
                ),
                max_size=4,
            ).map(lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}")
        ),
        max_leaves=12,
    )


@st.composite
def junk_actions(draw) -> str:
    name = draw(
        st.sampled_from(['"echo"', '"plot"', '"finish"', '"\\ud800"', '"nope"'])
        | st.text(max_size=8).map(json.dumps)
    )
    arguments = draw(junk_json())
    prefix = draw(st.sampled_from(["", "\ud800", "[" * 3000, "<tool_call>"]) | st.text(max_size=20))
    body = draw(
        st.sampled_from(
            [
                f'{{"name": {name}, "arguments": {arguments}}}',
                f'{{"name": {name}, "arguments": {json.dumps(arguments)}}}',
                arguments,
                "[" * draw(st.integers(0, 40_000)),
            ]
        )
    )
    return f"{prefix}<tool_call>{body}</tool_call>" + draw(st.text(max_size=20))


@pytest.mark.parametrize("make", [lambda: gym.make("agentrl/Echo-v0"), PlotEnv], ids=["Echo-v0", "PlotEnv"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(action=junk_actions() | st.text(max_size=200))
def test_step_never_raises_and_observations_encode(make, action):
    env = make()
    obs, info = env.reset(seed=1)
    obs.encode("utf-8")
    obs, reward, terminated, truncated, info = env.step(action)
    obs.encode("utf-8")
    json.dumps(info, ensure_ascii=False).encode("utf-8")
    assert isinstance(reward, float) and math.isfinite(reward)
    assert info["turn"] == 1 and not truncated


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_json_values, st.booleans(), st.integers(min_value=0, max_value=40))
def test_the_plain_text_shortcut_never_lets_junk_through(value, ascii_only, depth):
    """`_load` skips walking a value whose text is plain; wherever it does, the walk finds nothing.
    The texts cover lone surrogates (escaped or not), non-ASCII text and nesting near the bound."""
    from agentrl.core.parsing import _DECODER, _junk, _plain

    for _ in range(depth):
        value = [value]
    text = json.dumps(value, ensure_ascii=ascii_only)
    try:
        decoded = _DECODER.decode(text)
    except (ValueError, RecursionError):  # out-of-range numbers and the like: rejected before the walk
        return
    if _plain(text):
        assert _junk(decoded) is None


def test_the_shortcut_still_sees_escaped_surrogates_and_deep_nesting():
    from agentrl.core.parsing import MAX_DEPTH, ParseFailure, parse_tool_calls

    surrogate = '<tool_call>{"name": "echo", "arguments": {"text": "\\ud800"}}</tool_call>'
    nested = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    deep = '<tool_call>{"name": "echo", "arguments": {"text": ' + nested + "}}</tool_call>"
    for action, words in ((surrogate, "surrogate"), (deep, "nests deeper")):
        (item,) = parse_tool_calls(action)
        assert isinstance(item, ParseFailure) and words in item.message, item


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=8), _json_values, st.booleans())
def test_a_tool_response_reads_the_same_whichever_way_it_is_written(name, content, error):
    """Text content is written without the encoder's dict; any content (surrogates, quotes,
    control characters, non-ASCII) gives exactly what `json.dumps(..., ensure_ascii=False)` does."""
    from agentrl.core.tools import tool_response

    key = "error" if error else "content"
    expected = json.dumps({"name": name, key: content}, ensure_ascii=False, default=str)
    assert tool_response(name, content, error=error) == f"<tool_response>\n{expected}\n</tool_response>"
    if isinstance(content, str):
        for text in (content, content + "\ud800\"\\\n\x00é"):
            expected = json.dumps({"name": name, key: text}, ensure_ascii=False)
            assert tool_response(name, text, error=error) == f"<tool_response>\n{expected}\n</tool_response>"


def test_a_tool_response_with_a_name_that_is_not_text_takes_the_general_path():
    from agentrl.core.tools import tool_response

    assert tool_response(None, "x") == '<tool_response>\n{"name": null, "content": "x"}\n</tool_response>'
