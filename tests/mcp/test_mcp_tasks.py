"""MCP-v0's task file: what it accepts, what it refuses (naming the task), and how checks judge."""

from __future__ import annotations

import json

import pytest
from mcp_helpers import TASKS, task

from agentrl.core import ToolError
from agentrl.mcp.tasks import FinalState, TaskError, judge, load_tasks, normalise, substitute
from agentrl.mcp.tools import ServerTool


def test_a_jsonl_file_reads_back_as_the_dicts_give_it(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(t) for t in TASKS) + "\n\n")
    read = load_tasks(path)
    assert read == load_tasks(TASKS)
    first = read[0]
    assert (first.id, first.split, first.answer, first.files) == (
        "notes-0",
        "train",
        "1",
        {"notebook.json": '{"a": "1"}'},
    )
    assert read[0].setup_calls == ({"name": "put", "arguments": {"key": "seeded", "value": "notes-0"}},)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"checks": {}}, "has no check: it would pay any episode"),
        ({"checks": {"state": [{"name": "keys", "arguments": {}}]}}, "needs 'contains' or 'excludes'"),
        ({"split": "dev"}, "'split' must be one of ('train', 'test')"),
        ({"setup": {"files": {"../escape": "x"}}}, "must be a relative path inside the workspace"),
        ({"setup": {"files": {"/etc/passwd": "x"}}}, "must be a relative path inside the workspace"),
        ({"answer": "1"}, "unknown keys ['answer']"),
        ({"checks": {"verifier": "no_colon"}}, "'checks.verifier' is 'module:function'"),
        ({"oracle": [{"arguments": {}}]}, "each of 'oracle' must be {'name': str"),
    ],
)
def test_a_task_that_does_not_say_what_the_env_needs_is_refused_by_name(change, message):
    with pytest.raises(TaskError, match="task 'bad'") as caught:
        load_tasks([task("bad", **change)])
    assert message in str(caught.value)


def test_ids_are_unique_and_a_line_that_is_not_json_is_named(tmp_path):
    with pytest.raises(TaskError, match="task id 'notes-0' appears twice"):
        load_tasks([TASKS[0], TASKS[0]])
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(TASKS[0]) + "\n{oops\n")
    with pytest.raises(TaskError, match="line 2: not JSON"):
        load_tasks(path)


def test_checks_judge_the_answer_normalised_and_the_state_by_contains_and_excludes():
    raw = task(
        "j",
        checks={
            "answer": "Hello  World",
            "state": [{"name": "keys", "arguments": {}, "contains": ["a", "b"], "excludes": ["secret"]}],
        },
    )
    (read,) = load_tasks([raw])

    def final() -> FinalState:
        raise AssertionError("a task without a verifier never builds the final state")

    assert judge(read, " hello world\n", ["a, b"], final).solved
    assert not judge(read, "hello", ["a, b"], final).solved  # a wrong answer
    assert not judge(read, None, ["a, b"], final).solved  # no finish
    assert judge(read, "hello world", ["a, b, secret"], final).checks == {
        "answer": True,
        "state[0] keys": False,
    }
    assert not judge(read, "hello world", [None], final).solved  # the check's call failed
    assert normalise("  A\tB  ") == "a b"
    assert substitute({"p": ["{workspace}/repo"], "n": 3}, "/w") == {"p": ["/w/repo"], "n": 3}


def test_a_server_tool_checks_arguments_against_its_schema_before_any_call():
    described = {
        "name": "search",
        "description": "Find.",
        "inputSchema": {
            "type": "object",
            "title": "searchArguments",
            "required": ["q"],
            "properties": {"q": {"type": "string", "maxLength": 5}, "n": {"type": "integer", "minimum": 1}},
        },
    }
    tool = ServerTool.listed(described)
    assert tool.spec() == {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Find.",
            "parameters": {
                "type": "object",
                "required": ["q"],
                "properties": {
                    "q": {"type": "string", "maxLength": 5},
                    "n": {"type": "integer", "minimum": 1},
                },
            },
        },
    }
    assert tool.validate({"q": "abc", "n": 2}).arguments == {"q": "abc", "n": 2}
    with pytest.raises(ToolError, match=r"q: 'toolong' is too long; n: 0 is less than the minimum of 1$"):
        tool.validate({"q": "toolong", "n": 0})
    broken = ServerTool.listed({"name": "bad", "inputSchema": {"type": "nonsense"}})
    with pytest.raises(ToolError, match="the server's input schema for 'bad' is not valid JSON Schema"):
        broken.validate({})
