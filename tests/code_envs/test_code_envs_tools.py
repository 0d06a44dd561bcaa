"""The shared tools against a real container: shell state, a persistent interpreter, truncation,
timeouts, bad paths, crashes, determinism and container cleanup."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from code_envs_helpers import call, play

import agentrl  # noqa: F401  (registers the ids)

pytestmark = pytest.mark.docker


def content(observation: str) -> str:
    """The content (or error) of the single tool response in an observation."""
    body = observation.split("<tool_response>\n", 1)[1].rsplit("\n</tool_response>", 1)[0]
    payload = json.loads(body)
    return payload.get("content", payload.get("error"))


def test_tool_lists(bash_env, code_env):
    assert list(type(bash_env).tools) == ["execute_bash", "read_file", "write_file", "finish"]
    assert list(type(code_env).tools) == ["run_python", "execute_bash", "write_file", "finish"]


def test_shell_keeps_state_and_files_round_trip(bash_env):
    bash_env.reset(seed=3, options={"task_id": "count_files/0"})
    steps = [
        call("execute_bash", command="mkdir -p sub && cd sub && export GREETING=hi"),
        call("execute_bash", command='pwd; echo "$GREETING"'),
        call("write_file", path="sub/new/note.txt", content="line one\nline two\n"),
        call("read_file", path="sub/new/note.txt"),
        call("execute_bash", command="wc -l < new/note.txt"),
    ]
    outputs = [content(bash_env.step(s)[0]) for s in steps]
    assert outputs[1].splitlines()[1:] == ["/workspace/sub", "hi"]
    assert outputs[2] == "wrote 18 bytes to sub/new/note.txt"
    assert outputs[3] == "line one\nline two\n"
    assert outputs[4].endswith("2")


def test_bad_paths_and_commands_are_tool_errors_not_crashes(bash_env):
    bash_env.reset(seed=0, options={"task_id": "count_files/1"})
    obs, _, terminated, _, info = bash_env.step(call("read_file", path="missing.txt"))
    assert "no such file" in content(obs) and not terminated and info["invalid_calls"] == 1
    obs, _, terminated, _, info = bash_env.step(call("write_file", path="/etc/passwd", content="x"))
    assert "cannot write /etc/passwd" in content(obs) and not terminated and "error" not in info
    obs, _, terminated, _, _ = bash_env.step(call("execute_bash", command="exit 3"))
    assert content(obs).startswith("[exit code 3]") and not terminated
    obs, _, terminated, _, _ = bash_env.step(
        '<tool_call>{"name": "execute_bash", "arguments": {}}</tool_call>'
    )
    assert "invalid arguments" in obs and not terminated
    obs, _, terminated, _, _ = bash_env.step("no tool call at all")
    assert "No tool call found" in obs and not terminated


def test_huge_output_is_truncated_with_byte_counts(bash_env):
    bash_env.reset(seed=0, options={"task_id": "count_files/2"})
    obs, *_ = bash_env.step(call("execute_bash", command="seq 1 2000000"))
    text = content(obs)
    total = sum(len(f"{i}\n") for i in range(1, 2_000_001))
    assert f"stdout {total} bytes" in text
    assert text.splitlines()[2] == "1" and text.rstrip().endswith("2000000")
    assert len(obs.encode()) < 3 * bash_env.max_output_bytes


def test_timeout_returns_what_was_printed(bash_env):
    bash_env.reset(seed=0, options={"task_id": "count_files/3"})
    obs, _, terminated, _, _ = bash_env.step(
        call("execute_bash", command="echo before; sleep 30 && echo finished")
    )
    text = content(obs)
    assert text.startswith("[timed out after 5s") and "before" in text and "finished" not in text
    assert not terminated
    obs, *_ = bash_env.step(call("execute_bash", command="echo still-alive"))
    assert "still-alive" in content(obs)


def test_python_interpreter_keeps_state_like_a_notebook(code_env):
    code_env.reset(seed=0, options={"task_id": "implement/0"})
    cells = [
        "import math\nvalues = [1, 2, 3]\ndef total(xs):\n    return sum(xs)\nprint('defined')",
        "values.append(4)\ntotal(values)",
        "1 / 0",
        "math.sqrt(total(values))",
    ]
    outputs = [content(code_env.step(call("run_python", code=c))[0]) for c in cells]
    assert outputs[0] == "[exit code 0]\ndefined"
    assert outputs[1] == "[exit code 0]\n10"
    assert outputs[2].startswith("[exit code 1]") and "ZeroDivisionError" in outputs[2]
    assert "server.py" not in outputs[2]  # only the cell's own frames
    assert outputs[3] == "[exit code 0]\n3.1622776601683795"


def test_python_timeout_keeps_earlier_state(code_env):
    code_env.reset(seed=0, options={"task_id": "implement/1"})
    code_env.step(call("run_python", code="x = 41"))
    obs, *_ = code_env.step(call("run_python", code="print('partial', flush=True)\nwhile True:\n    pass"))
    assert content(obs).startswith("[timed out after 5s")
    obs, *_ = code_env.step(call("run_python", code="x + 1"))
    assert content(obs) == "[exit code 0]\n42"


def test_partial_credit_is_the_fraction_of_hidden_tests(code_env):
    task_id = "fix_bug/4"
    reward, info = play(code_env, task_id, [call("finish")])
    assert reward == 0.0 and 0 < info["tests_passed"] < info["tests_total"]
    code_env.partial_credit = True
    try:
        reward, info = play(code_env, task_id, [call("finish")])
    finally:
        code_env.partial_credit = False
    assert reward == pytest.approx(info["tests_passed"] / info["tests_total"]) and 0 < reward < 1


def test_running_out_of_turns_grades_the_workspace(docker_backend):
    env = gym.make("agentrl/Bash-v0", max_turns=1, pool_size=4)
    try:
        env.reset(options={"task_id": "permissions/0"})
        command = "chmod 755 bin/*.sh && chmod 600 secrets/*.key && chmod 644 public/*"
        _, reward, terminated, truncated, info = env.step(call("execute_bash", command=command))
        assert truncated and not terminated and reward == 1.0 and info["solved"]
    finally:
        env.close()


def test_same_seed_same_world_and_observations(bash_env):
    # every file's path, mode, size and content (times excluded: the container is new each time)
    probe = call(
        "execute_bash",
        command="find . -path ./.git -prune -o -type f -printf '%p %m %s\\n' | sort; "
        "find . -path ./.git -prune -o -type f -print0 | sort -z | xargs -0 md5sum; "
        "git log --format='%H %s' 2>&1",
    )

    def run(seed: int, **options: str) -> tuple[str, str, str]:
        obs, info = bash_env.reset(seed=seed, options=options)
        return obs, info["task_id"], bash_env.step(probe)[0]

    assert run(11) == run(11)
    git = run(0, task_id="git_ops/4")
    assert git == run(0, task_id="git_ops/4") and len(git[2].split("Tune")) > 3  # same commit hashes
    assert {run(s)[1] for s in range(5)} != {run(11)[1]}  # seeds pick different tasks


def test_crashed_sandbox_ends_the_episode_with_an_error(docker_backend):
    env = gym.make("agentrl/Bash-v0", pool_size=4)
    try:
        env.reset(options={"task_id": "count_files/4"})
        # kill every process this user may signal, the sandbox's own agent included
        obs, reward, terminated, _, info = env.step(call("execute_bash", command="kill -9 -1"))
        assert terminated and reward == 0.0
        assert "sandbox" in info["error"] and "episode is over" in obs
        assert env.unwrapped.sandbox is None
    finally:
        env.close()


def test_closing_an_episode_deletes_its_container(cold_backend):
    env = gym.make("agentrl/Code-v0", pool_size=0)
    env.reset(options={"task_id": "implement/2"})
    assert len(cold_backend.container_ids()) >= 1
    env.close()
    env.close()  # twice is fine
    wait_until_no_containers(cold_backend)


def wait_until_no_containers(backend, timeout_s: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while backend.container_ids():
        assert time.monotonic() < deadline, f"leaked containers: {backend.container_ids()}"
        time.sleep(0.1)


def test_gymnasium_env_checker(docker_backend):
    from gymnasium.utils.env_checker import check_env

    env = gym.make("agentrl/Bash-v0", pool_size=4, command_timeout_s=5)
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


def test_hidden_tests_cannot_be_gamed_from_the_solution(code_env):
    task_id = "implement/0"  # shift_letters
    cheat = (
        "import json\n"
        "json.dumps = lambda *a, **k: 'x'\n"
        "json.JSONEncoder.encode = lambda self, o: '[]'\n"
        'print(\'{"passed": 99, "total": 99, "failures": []}\')\n'
        "def shift_letters(text):\n    return None\n"
    )
    reward, info = play(
        code_env, task_id, [call("write_file", path="solution.py", content=cheat), call("finish")]
    )
    assert reward == 0.0 and info["tests_passed"] == 0, info
