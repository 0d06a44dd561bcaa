"""Bash-v0's `info["state_hash"]` on the real Docker engine: the workspace as listed and the tool
results shown, whatever order the files were written in."""

from __future__ import annotations

from code_envs_helpers import call


def hashes(env, actions: list[str]) -> list[str]:
    _, info = env.reset(seed=3, options={"family": "count_files"})
    out = [info["state_hash"]]
    for action in actions:
        out.append(env.step(action)[4]["state_hash"])
    return out


def test_files_written_in_either_order_are_one_state(bash_env):
    a = call("write_file", path="scratch/a.txt", content="one\n")
    b = call("write_file", path="scratch/b.txt", content="two\n")
    ab, ba = hashes(bash_env, [a, b]), hashes(bash_env, [b, a])
    assert ab[0] == ba[0] and ab[2] == ba[2] and ab[1] != ba[1]
    # the same files with other content: another state, though every result said "written"
    other = hashes(bash_env, [a, call("write_file", path="scratch/b.txt", content="three\n")])
    assert other[1] == ab[1] and other[2] != ab[2]
    # a shell command that writes shows up in the listing
    touched = hashes(bash_env, [a, b, call("execute_bash", command="touch scratch/c.txt")])
    assert touched[:3] == ab and touched[3] != ab[2]
    assert "scratch/c.txt" in bash_env._world_state()  # the listing, not the (empty) output, names it
