"""The shared tools against a real container: shell state, a persistent interpreter, truncation,
timeouts, bad paths, crashes, determinism and container cleanup."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from code_envs_helpers import call, play, task_of

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
    bash_env.reset(seed=3, options={"family": "count_files"})
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


def test_paths_under_the_workspace_may_be_written_absolute(bash_env):
    bash_env.reset(seed=3, options={"family": "count_files"})
    written = content(bash_env.step(call("write_file", path="/workspace/abs/note.txt", content="hi\n"))[0])
    assert written == "wrote 3 bytes to /workspace/abs/note.txt"
    assert content(bash_env.step(call("read_file", path="abs/note.txt"))[0]) == "hi\n"
    assert content(bash_env.step(call("read_file", path="/workspace/abs/note.txt"))[0]) == "hi\n"


def test_bad_paths_and_commands_are_tool_errors_not_crashes(bash_env):
    bash_env.reset(seed=0, options={"family": "count_files"})
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
    bash_env.reset(seed=0, options={"family": "count_files"})
    obs, *_ = bash_env.step(call("execute_bash", command="seq 1 2000000"))
    text = content(obs)
    total = sum(len(f"{i}\n") for i in range(1, 2_000_001))
    assert f"stdout {total} bytes" in text
    assert text.splitlines()[2] == "1" and text.rstrip().endswith("2000000")
    assert len(obs.encode()) < 3 * bash_env.max_output_bytes


def test_timeout_returns_what_was_printed(bash_env):
    bash_env.reset(seed=0, options={"family": "count_files"})
    obs, _, terminated, _, _ = bash_env.step(
        call("execute_bash", command="echo before; sleep 30 && echo finished")
    )
    text = content(obs)
    assert text.startswith("[timed out after 5s") and "before" in text and "finished" not in text
    assert not terminated
    obs, *_ = bash_env.step(call("execute_bash", command="echo still-alive"))
    assert "still-alive" in content(obs)


def test_python_interpreter_keeps_state_like_a_notebook(code_env):
    code_env.reset(seed=0, options={"family": "implement"})
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
    code_env.reset(seed=0, options={"family": "implement"})
    code_env.step(call("run_python", code="x = 41"))
    obs, *_ = code_env.step(call("run_python", code="print('partial', flush=True)\nwhile True:\n    pass"))
    assert content(obs).startswith("[timed out after 5s")
    obs, *_ = code_env.step(call("run_python", code="x + 1"))
    assert content(obs) == "[exit code 0]\n42"


def test_partial_credit_counts_hidden_cases_the_start_failed(code_env):
    family, seed = "module_suite", 3
    task = task_of("agentrl/Code-v0", family, seed)
    reference = dict(task.solution[0][1])["content"]
    stubs = task.workspace["mylib.py"].data().decode().split("\n\n\ndef ")
    # the reference, then the stubs of the 2nd and 3rd function again: only the 1st one works
    partial = reference + "\n\n\ndef " + "\n\n\ndef ".join(stubs[2:])
    code_env.partial_credit = True
    try:
        nothing, info0 = play(code_env, family, [call("finish")], seed=seed)
        reward, info = play(
            code_env,
            family,
            [call("write_file", path="mylib.py", content=partial), call("finish")],
            seed=seed,
        )
    finally:
        code_env.partial_credit = False
    assert nothing == 0.0 and info0["tests_passed"] == 0
    assert reward == pytest.approx(info["tests_passed"] / info["tests_total"]) and 0 < reward < 1, info


def test_breaking_what_worked_costs_partial_credit(code_env):
    family, seed = "fix_bug", 5
    task = task_of("agentrl/Code-v0", family, seed)
    name = task.workspace["solution.py"].data().decode().split("def ")[1].split("(")[0]
    broken = f"def {name}(*args, **kwargs):\n    return None\n"
    code_env.partial_credit = True
    try:
        reward, info = play(
            code_env,
            family,
            [call("write_file", path="solution.py", content=broken), call("finish")],
            seed=seed,
        )
    finally:
        code_env.partial_credit = False
    assert reward == 0.0 and info["tests_passed"] == 0 and not info["solved"], info


def test_running_out_of_turns_grades_the_workspace(docker_backend):
    env = gym.make("agentrl/Bash-v0", max_turns=1, pool_size=4)
    try:
        env.reset(seed=4, options={"family": "permissions"})
        command = task_of("agentrl/Bash-v0", "permissions", 4).solution[0][1]["command"]
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
    git = run(4, family="git_ops")
    assert git == run(4, family="git_ops") and git[2].count("\\n") > 5  # same commit hashes
    assert len({run(s)[1] for s in range(4)}) == 4  # seeds pick different tasks


def test_crashed_sandbox_ends_the_episode_with_an_error(cold_backend):
    import subprocess

    env = gym.make("agentrl/Bash-v0", pool_size=0)
    try:
        env.reset(options={"family": "count_files"})
        (container,) = cold_backend.container_ids()  # this episode's, the only one of a pool-less backend
        subprocess.run(["docker", "kill", container], check=True, capture_output=True)
        obs, reward, terminated, _, info = env.step(call("execute_bash", command="echo hi"))
        assert terminated and reward == 0.0
        assert "sandbox" in info["error"] and "episode is over" in obs
        assert env.unwrapped.sandbox is None
    finally:
        env.close()


def test_closing_an_episode_deletes_its_container(cold_backend):
    env = gym.make("agentrl/Code-v0", pool_size=0)
    env.reset(options={"family": "implement"})
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
    cheat = (
        "import json, sys\n"
        "json.dumps = lambda *a, **k: '[]'\n"
        "json.JSONEncoder.encode = lambda self, o: '[]'\n"
        "for i in range(64):\n"
        "    print(sys.argv[1] if len(sys.argv) > 1 else '', i, 1, '[]')\n"
        "def __getattr__(name):\n    return lambda *a, **k: None\n"
    )
    # seed 3 asks for a Roman numeral: no expected output is a list, so a forged '[]' matches nothing
    reward, info = play(
        code_env, "implement", [call("write_file", path="solution.py", content=cheat), call("finish")], seed=3
    )
    assert reward == 0.0 and info["tests_passed"] == 0, info


def test_info_names_the_task_and_hides_the_rest(docker_backend):
    def info_of(seed: int, **kwargs) -> dict:
        env = gym.make("agentrl/Bash-v0", pool_size=4, **kwargs)
        try:
            return env.reset(seed=seed, options={"family": "log_errors"})[1]
        finally:
            env.close()

    plain = info_of(3)
    assert set(plain) == {"task_id", "tools", "turn", "state_hash"}  # the hash: of the workspace
    assert plain["task_id"] == info_of(3)["task_id"] != info_of(4)["task_id"]
    operator = info_of(3, privileged_info=True)
    assert operator["task_id"] == plain["task_id"]
    expected = task_of("agentrl/Bash-v0", "log_errors", 3).answer
    assert operator["task"] == {"family": "log_errors", "index": 3, "split": "train", "answer": expected}


def test_split_option_picks_the_held_out_task(bash_env):
    _, info = bash_env.reset(seed=3, options={"family": "log_errors", "split": "test"})
    assert info["task_id"] == task_of("agentrl/Bash-v0", "log_errors", 3, "test").task_id
    assert info["task_id"] != task_of("agentrl/Bash-v0", "log_errors", 3, "train").task_id


def test_interpreter_hash_seed_is_fixed(code_env):
    def hashed() -> str:
        code_env.reset(seed=0, options={"family": "implement"})
        return content(
            code_env.step(call("run_python", code="hash('agentrl'), list({'a', 'b', 'c', 'd'})"))[0]
        )

    first = hashed()
    assert first.startswith("[exit code 0]") and first == hashed()
