"""Bash-v0 / Code-v0 forks (the action log replayed into a fresh container) and trajectory records,
on the real Docker engine."""

from __future__ import annotations

import json

import pytest
from code_envs_helpers import call

from agentrl.code_envs.workspace import (
    LISTING_COMMAND,
    LISTING_MAX_BYTES,
    LISTING_SCRIPT,
    listing,
    read_listing,
)
from agentrl.core import EpisodeOverError
from agentrl.core.trajectory import transcript


def content(observation: str) -> str:
    return json.loads(observation.split("<tool_response>\n", 1)[1].split("\n</tool_response>")[0])["content"]


def test_bash_fork_replays_into_its_own_container_and_continues_exactly(bash_env):
    env = bash_env
    env.reset(seed=3, options={"family": "count_files"})
    env.step(call("execute_bash", command="cd /workspace && mkdir -p scratch && export MARK=shell-state"))
    env.step(call("write_file", path="scratch/a.txt", content="one\n"))
    (fork,) = env.fork()
    try:
        assert type(fork) is type(env) and fork.sandbox is not env.sandbox
        assert fork.fork_divergence == [] and fork.messages == env.messages
        assert fork.command_timeout_s == env.command_timeout_s and fork.task.task_id == env.task.task_id
        # the same next actions give the same results, the shell's variables and cwd included
        rest = [
            call("execute_bash", command="echo $MARK; pwd; cat scratch/a.txt; ls scratch"),
            call("read_file", path="scratch/a.txt"),
        ]
        assert [fork.step(a)[:4] for a in rest] == [env.step(a)[:4] for a in rest]
        # isolation: what one writes, the other does not see
        env.step(call("write_file", path="scratch/a.txt", content="parent\n"))
        fork.step(call("execute_bash", command="echo fork >> scratch/a.txt"))
        assert content(env.step(call("read_file", path="scratch/a.txt"))[0]) == "parent\n"
        assert content(fork.step(call("read_file", path="scratch/a.txt"))[0]) == "one\nfork\n"
        # the fork's record is whole and rebuilds its own transcript
        record = json.loads(json.dumps(fork.trajectory()))
        assert transcript(record) == fork.messages and len(record["steps"]) == fork.turn
        assert record["steps"][1]["calls"][0]["arguments"] == {"path": "scratch/a.txt", "content": "one\n"}
    finally:
        fork.close()
    parent = json.loads(json.dumps(env.trajectory()))
    assert transcript(parent) == env.messages and parent["forks"][0]["at_step"] == 2
    # each step records what it changed in the workspace: paths, kinds, modes, content hashes
    # (a step that only read, like read_file, records nothing)
    changes = [step["state_change"] and step["state_change"]["workspace"] for step in parent["steps"]]
    assert [c is None for c in changes] == [False, False, False, True, False, True]
    assert changes[0] == {"changed": {"scratch": "d755"}}
    assert (
        list(changes[1]["changed"]) == ["scratch/a.txt"]
        and changes[1]["changed"]["scratch/a.txt"][:5] == "f644:"
    )


def test_wall_clock_output_is_where_a_replayed_fork_diverges(bash_env):
    env = bash_env
    env.reset(seed=1, options={"family": "count_files"})
    env.step(call("execute_bash", command="echo steady"))
    env.step(call("execute_bash", command="date +%s%N"))
    (fork,) = env.fork()
    try:
        assert fork.fork_divergence == [2]  # the clock moved; the transcript kept is the parent's
        assert fork.messages == env.messages
    finally:
        fork.close()


NOISE = {
    "random": "echo $RANDOM$RANDOM > noise.txt",
    "date": "date +%s%N > noise.txt",
    "urandom": "head -c 16 /dev/urandom > noise.bin",
    "same-output-other-file": "echo written; echo $RANDOM$RANDOM > noise.txt",
}


@pytest.mark.parametrize("noise", NOISE, ids=list(NOISE))
def test_a_step_whose_files_differ_on_replay_is_a_divergence(bash_env, noise):
    """Output, exit status and the workspace where the step touched it are all compared: a step that
    prints the same (or nothing) but writes different bytes is listed; steady steps before and
    after it, which touch other files or none, are not."""
    env = bash_env
    env.reset(seed=2, options={"family": "count_files"})
    env.step(call("execute_bash", command="echo steady > steady.txt"))
    env.step(call("execute_bash", command=NOISE[noise]))
    env.step(call("execute_bash", command="echo later; echo more >> steady.txt"))
    env.step(call("read_file", path="steady.txt"))
    (fork,) = env.fork()
    try:
        assert fork.fork_divergence == [2], fork.fork_divergence
        assert fork.messages == env.messages
    finally:
        fork.close()


def test_an_interpreter_step_that_writes_different_bytes_is_a_divergence(code_env):
    env = code_env
    env.reset(seed=1, options={"family": "implement"})
    env.step(call("run_python", code="import random\nx = 1"))
    env.step(call("run_python", code="open('draw.txt', 'w').write(str(random.random()))\nprint('drawn')"))
    env.step(call("run_python", code="print(x)"))
    (fork,) = env.fork()
    try:
        assert fork.fork_divergence == [2], fork.fork_divergence
    finally:
        fork.close()


def test_code_fork_replays_the_interpreter_state(code_env):
    env = code_env
    env.reset(seed=0, options={"family": "implement"})
    env.step(call("run_python", code="import math\nx = 41"))
    fork_a, fork_b = env.fork(2)
    try:
        assert fork_a.fork_divergence == [] and fork_b.fork_divergence == []
        env.step(call("run_python", code="x = 0"))
        fork_b.step(call("run_python", code="x = 100"))
        show = call("run_python", code="print(x + 1)")
        assert content(fork_a.step(show)[0]) == "[exit code 0]\n42"
        assert content(fork_b.step(show)[0]) == "[exit code 0]\n101"
        assert content(env.step(show)[0]) == "[exit code 0]\n1"
    finally:
        fork_a.close()
        fork_b.close()
    env.step(call("finish", answer=""))
    with pytest.raises(EpisodeOverError):
        env.fork()


def test_the_listing_script_reports_what_find_and_sha256sum_report(bash_env):
    """The listing forks compare is a Python walk; on a workspace of every kind of entry (odd names,
    links, a FIFO, unreadable files and folders, pruned entries, a file over the hash limit) it says
    what the same listing by find and sha256sum says, and a tree too deep for its paths falls back
    to find, so nothing in the workspace goes unreported."""
    env = bash_env
    env.reset(seed=0, options={"family": "git_ops"})
    sandbox = env.sandbox
    made = sandbox.exec(
        "mkdir -p 'odd dir/sub' locked __pycache__ x/__pycache__ && printf 'a\\0b' > 'odd dir/sub/new\nline'"
        " && ln -s /etc/passwd out && ln -s 'odd dir' dirlink && mkfifo fifo && echo s > secret"
        " && chmod 000 secret && echo q > locked/q && chmod 000 locked && echo c > x/__pycache__/c.pyc"
        " && touch $'\\xff\\xfe' && chmod 4755 'odd dir' && head -c 70000000 /dev/zero > big"
        " && printf '%s  x' $(printf '0%.0s' $(seq 64)) > $'tab\\tname'",
        mode="oneshot",
    )
    assert made.status == "ok", made

    by_find = read_listing(sandbox.exec(LISTING_COMMAND, mode="oneshot", max_output_bytes=LISTING_MAX_BYTES))
    by_script = listing(sandbox)
    assert isinstance(by_script, dict) and by_script == by_find
    assert by_script["big"] == "f644" and by_script["secret"] == "f0" and "locked/q" not in by_script
    assert by_script["odd dir"] == "d4755" and by_script["dirlink"] == "l777:odd dir"
    assert "x/__pycache__" not in by_script and ".git/index" not in by_script
    deep = sandbox.run_code("import os\nfor _ in range(1500): os.mkdir('dd'); os.chdir('dd')\nopen('f', 'w')")
    assert deep.status == "ok", deep
    script = sandbox.run_code(LISTING_SCRIPT, "python", max_output_bytes=LISTING_MAX_BYTES)
    assert script.status == "error"  # its paths grow past PATH_MAX; find walks by descriptors
    assert "/".join(["dd"] * 1500) + "/f" in listing(sandbox)
