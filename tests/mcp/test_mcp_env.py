"""MCP-v0 over the notebook test server in process isolation: episodes, rewards and their hacks,
seeds, forks, the warm pool, the HTTP transport, and nothing left running after close."""

from __future__ import annotations

import glob
import json
import subprocess
import sys
import time

import gymnasium as gym
import pytest
from mcp_helpers import TASKS, call, notebook, oracle_actions, task
from support import free_port

from agentrl.mcp.env import IsolationWarning, NotForkable
from agentrl.mcp.tasks import TaskError


def play(env, actions, **reset):
    observation, info = env.reset(**reset)
    steps = [(observation, 0.0, False, False, info)]
    for action in actions:
        steps.append(env.step(action))
        if steps[-1][2] or steps[-1][3]:
            break
    return steps


def processes_tagged(tag: str) -> list[int]:
    """Live processes whose command line holds `tag`."""
    found = []
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(path, "rb") as f:
                if tag.encode() in f.read():
                    found.append(int(path.split("/")[2]))
        except OSError:
            continue
    return found


def test_the_oracle_earns_the_reward_and_the_record_keeps_every_call(make_env):
    env = make_env()
    steps = play(env, oracle_actions(TASKS[0]), options={"task_id": "notes-0"})
    observation, info = steps[0][0], steps[0][4]
    assert observation.startswith("[notes-0] Store b=2")
    assert [t["function"]["name"] for t in info["tools"]][:3] == ["put", "get", "keys"]
    assert info["tools"][-1]["function"]["name"] == "finish"
    assert info["tools"][0]["function"]["parameters"]["required"] == ["key", "value"]
    assert steps[2][0] == '<tool_response>\n{"name": "get", "content": "1"}\n</tool_response>'
    final = steps[-1]
    assert (final[1], final[2]) == (1.0, True)
    assert final[4]["checks"] == {"answer": True, "state[0] keys": True}
    record = env.trajectory()
    assert [c["name"] for s in record["steps"] for c in s["calls"]] == ["put", "get", "finish"]
    # the state checks' results after each step that called the server
    assert record["steps"][0]["state_change"] == {"state": ["a, b, seeded"]}


@pytest.mark.parametrize(
    ("actions", "failed"),
    [
        (oracle_actions(TASKS[0], answer="2"), "answer"),  # a wrong answer
        ([call("get", key="a"), call("finish", answer="1")], "state[0] keys"),  # b never stored
        ([call("put", key="b", value="2")] * 3, "answer"),  # no finish: truncated, judged all the same
    ],
    ids=["wrong-answer", "state-not-reached", "never-finished"],
)
def test_an_episode_that_misses_a_check_earns_nothing(make_env, actions, failed):
    env = make_env(max_turns=3)
    final = play(env, actions, options={"task_id": "notes-0"})[-1]
    assert final[1] == 0.0 and (final[2] or final[3])
    assert final[4]["checks"][failed] is False


def test_the_verifier_sees_the_final_state_and_a_bad_verifier_is_loud(make_env):
    checks = {"verifier": "mcp_helpers:b_is_two"}
    env = make_env(
        tasks=[task("v-0", checks=checks), task("v-1", checks={"verifier": "mcp_helpers:not_a_score"})]
    )
    # the note b written by the setup, not by the agent, does not pay: the verifier reads the calls
    assert play(env, [call("finish", answer="")], options={"task_id": "v-0"})[-1][1] == 0.0
    final = play(
        env, [call("put", key="b", value="2"), call("finish", answer="")], options={"task_id": "v-0"}
    )[-1]
    assert final[1] == 1.0 and final[4]["checks"] == {"verifier": True}
    env.reset(options={"task_id": "v-1"})
    with pytest.raises(TaskError, match="returned 'yes', not a bool or a float"):
        env.step(call("finish", answer=""))


def test_tool_errors_unknown_tools_and_arguments_the_schema_refuses_are_observations(make_env):
    env = make_env()
    env.reset(options={"task_id": "notes-0"})
    observation, reward, terminated, _, info = env.step(
        call("get", key="nope") + call("nosuch") + call("put", key=3) + call("keys")
    )
    responses = [json.loads(line) for line in observation.split("\n") if line.startswith("{")]
    assert responses[0] == {"name": "get", "error": "Error executing tool get: no note named nope"}
    assert responses[1]["error"].startswith("unknown tool 'nosuch'; available tools: put, get, keys")
    assert responses[2]["error"] == (
        "invalid arguments for 'put': key: 3 is not of type 'string'; "
        "arguments: 'value' is a required property"
    )
    assert responses[3] == {
        "name": "keys",
        "content": "a, seeded",
    }  # the refused put never reached the server
    assert (reward, terminated, info["invalid_calls"]) == (0.0, False, 3)
    steps = env.trajectory()["steps"]
    assert [c["ok"] for c in steps[0]["calls"]] == [False, False, False, True]


def test_junk_on_stdout_and_a_huge_answer_are_said_and_the_episode_goes_on(make_env):
    env = make_env(max_result_chars=1000, call_timeout_s=60.0)  # 10 MB through JSON-RPC takes seconds
    env.reset(options={"task_id": "notes-0"})
    observation, _, terminated, _, _ = env.step(call("junk") + call("huge", megabytes=10))
    junk, huge = (json.loads(line)["content"] for line in observation.split("\n") if line.startswith("{"))
    assert junk == (
        "answered after junk\n[the server also wrote 1 line(s) to stdout that are not MCP messages, "
        "ignored: ['this is not json']]"
    )
    assert len(huge) < 1200 and huge.endswith("[the result was 10,485,760 characters; clipped to 1,000]")
    assert not terminated
    assert env.step(call("get", key="a"))[0].endswith('"content": "1"}\n</tool_response>')


@pytest.mark.parametrize(("tool", "kind"), [("crash", "crashed"), ("hang", "timeout")])
def test_a_server_that_crashes_or_hangs_ends_the_episode_saying_so_and_leaves_no_process(
    make_env, tool, kind
):
    tag = f"failing-{tool}-{time.monotonic_ns()}"
    env = make_env(server=notebook(tag=tag), call_timeout_s=1.0)
    env.reset(options={"task_id": "notes-0"})
    assert processes_tagged(tag)
    began = time.perf_counter()
    observation, reward, terminated, _, info = env.step(call(tool) + call("keys"))
    assert time.perf_counter() - began < 10
    assert (reward, terminated) == (0.0, True)
    assert info["error"].startswith(f"the MCP server failed ({kind}):")
    assert "The MCP server stopped working; the episode is over" in observation
    assert "not called: the server is not running" in observation  # the call after the failure
    assert info["checks"] == {"server": False}
    assert env.trajectory()["steps"][0]["calls"][0]["ok"] is False
    env.close()
    assert processes_tagged(tag) == []


def test_a_thousand_tools_are_offered_up_to_the_bound_and_said(make_env):
    env = make_env(server=notebook("--tools", "1000"), max_tools=50)
    observation, info = env.reset(options={"task_id": "notes-0"})
    assert len(info["tools"]) == 51  # the first 50 the server lists, and finish
    assert observation.split("\n\n")[1] == "The server lists more than 50 tools; the first 50 are offered."
    answer = env.step(call("extra_999", n=1))[0]
    assert "unknown tool 'extra_999'" in answer
    assert env.step(call("extra_0", n=7))[0].endswith('"content": "extra 0: 7"}\n</tool_response>')


def test_the_same_seed_gives_the_same_task_and_observations(make_env):
    env, other = make_env(), make_env()
    actions = [call("put", key="b", value="2"), call("keys")]
    first, again = play(env, actions, seed=5), play(other, actions, seed=5)
    assert [s[:4] for s in first] == [s[:4] for s in again]
    assert [s[4]["state_hash"] for s in first] == [s[4]["state_hash"] for s in again]
    # seeds 0 and 1 draw the split's two tasks (the test task is never drawn in train)
    assert [play(env, [], seed=s)[0][4]["task_id"] for s in (0, 1)] == ["notes-1", "notes-0"]
    with pytest.raises(ValueError, match="no task 'notes-2' in split 'train'"):
        env.reset(options={"task_id": "notes-2"})


def test_a_fork_replays_the_calls_into_fresh_servers_and_a_nondeterministic_server_cannot_fork(make_env):
    env = make_env()
    env.reset(options={"task_id": "notes-0"})
    env.step(call("put", key="b", value="2"))
    (child,) = env.fork(1)
    assert child.server is not env.server and child.step(call("keys"))[0] == env.step(call("keys"))[0]
    env.step(call("nonce"))
    with pytest.raises(NotForkable, match=r"steps \[3\] gave other results"):
        env.fork(2)
    assert len(env.trajectory()["forks"]) == 1  # the failed forks are not in the record


def test_the_warm_pool_starts_the_next_episode_ahead_and_close_stops_every_server(make_env):
    tag = f"pool-{time.monotonic_ns()}"
    env = make_env(server=notebook(tag=tag), pool_size=2)
    env.reset(options={"task_id": "notes-0"})
    deadline = time.monotonic() + 30
    while len(processes_tagged(tag)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(processes_tagged(tag)) == 2  # the episode's server, and one warm for the task's next episode
    time.sleep(0.5)  # let the warm one finish its setup
    began = time.perf_counter()
    observation, _ = env.reset(options={"task_id": "notes-0"})
    assert time.perf_counter() - began < 0.3  # a cold start runs an interpreter and the SDK's handshake
    assert env.step(call("keys"))[0].endswith(
        '"content": "a, seeded"}\n</tool_response>'
    )  # a fresh workspace
    env.close()
    assert processes_tagged(tag) == []


def test_process_isolation_warns_and_a_url_server_takes_no_files(make_env):
    server = notebook()
    with pytest.warns(IsolationWarning, match="outside any sandbox"):
        gym.make("agentrl/MCP-v0", server=server, tasks=TASKS, isolation="process").close()
    with pytest.raises(ValueError, match="cannot set up files there"):
        make_env(server="http://127.0.0.1:9/mcp")
    with pytest.raises(ValueError, match="isolation must be one of"):
        make_env(isolation="none")


def test_a_streamable_http_server_is_played_through_its_url(make_env, tmp_path):
    port = free_port()
    served = subprocess.Popen(
        [sys.executable, str(notebook()[1]), "--dir", str(tmp_path), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        tasks = [task("http-0", setup={}, checks={"answer": "2"})]
        env = make_env(server=url, tasks=tasks, start_timeout_s=5.0)
        deadline = time.monotonic() + 30
        while True:
            try:
                env.reset(seed=0)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert env.step(call("put", key="a", value="2"))[0].endswith(
            '"content": "stored a"}\n</tool_response>'
        )
        final = env.step(call("get", key="a") + call("finish", answer="2"))
        assert final[1] == 1.0 and json.loads((tmp_path / "notebook.json").read_text()) == {"a": "2"}
    finally:
        served.kill()
        served.wait()


def test_import_agentrl_and_the_env_module_load_no_sdk():
    code = (
        "import sys, agentrl, agentrl.mcp, agentrl.mcp.env; "
        "print([m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
