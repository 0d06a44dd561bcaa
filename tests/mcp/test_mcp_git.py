"""MCP-v0's git tasks over the real mcp-server-git: the generator (determinism, both splits, disjoint
content, no answer in sight) and each family's oracle, played through the env on held-out tasks."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
from real_servers import git_tasks, make_env, play

from agentrl.mcp import git_repos
from agentrl.mcp import git_tasks as gt
from agentrl.mcp.tasks import load_tasks, normalise

MINIMAL_ENV = {"PATH": os.environ["PATH"], "HOME": "/nonexistent"}  # as an episode's setup runs


def words(text: str) -> set[str]:
    """The words of `text`, commit hashes left out."""
    return set(re.findall(r"[a-z]+", re.sub(r"\b[0-9a-f]{40}\b", " ", text).lower()))


def test_the_same_seed_builds_the_same_repositories_and_tasks(tmp_path):
    # the expected hash comes from running the setup script: equal tasks mean equal commits
    first, again = gt.make_task("blame", "train", 3, 0), gt.make_task("blame", "train", 3, 0)
    assert first == again and re.fullmatch(r"[0-9a-f]{40}", first["checks"]["answer"])
    assert gt.make_task("blame", "train", 4, 0)["checks"]["answer"] != first["checks"]["answer"]
    # the setup script, run in a workspace, makes the commits `build` learnt the hashes of
    repo = git_repos.build(git_repos.draw_repo("test", "7", pending=2))
    subprocess.run(["bash", "-c", git_repos.setup_script(repo)], cwd=tmp_path, check=True, env=MINIMAL_ENV)

    def log(revisions: str) -> list[str]:
        return subprocess.run(["git", "log", "--reverse", "--format=%H", revisions], cwd=tmp_path / "repo",
                              check=True, capture_output=True, text=True).stdout.split()

    assert log("main") == [c.hash for c in repo.main] and len(set(log("main"))) == len(repo.main)
    for name, own in repo.branches.items():
        assert log(f"main..{name}") == [c.hash for c in own]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=tmp_path / "repo", capture_output=True,
                            text=True, check=True).stdout
    assert sorted(line.split()[-1] for line in status.splitlines()) == sorted(repo.pending)


def test_the_command_line_writes_every_family_of_both_splits(tmp_path):
    tasks = gt.make_tasks()  # the default file: 24 a split
    assert len(tasks) == 48 and len({t["id"] for t in tasks}) == 48
    for split in ("train", "test"):
        assert {t["family"] for t in tasks if t["split"] == split} == set(gt.FAMILIES)
    out = tmp_path / "tasks.jsonl"
    gt.main(["--out", str(out), "--count", "2"])
    written = [json.loads(line) for line in out.read_text().splitlines()]
    # a task depends on its family, split, seed and index only: the file is a prefix of the long run
    assert written == [*tasks[:2], *tasks[24:26]]
    assert {t.id for t in load_tasks(out)} == {t["id"] for t in written}


def test_train_and_test_share_no_content():
    assert not set(git_repos.WORDS["train"]) & set(git_repos.WORDS["test"])
    assert not words(" ".join(git_repos.AUTHORS["train"])) & words(" ".join(git_repos.AUTHORS["test"]))
    # what every task says anyway: its template and the setup script's own words
    scaffold = words(" ".join(gt.PROMPTS.values())) | {
        "set", "eu", "export", "git", "config", "global", "dev", "null", "nosystem", "init", "q", "b", "main",
        "repo", "cd", "user", "name", "email", "workspace", "maintainer", "example", "org", "fast", "import",
        "quiet", "end", "of", "history", "commit", "refs", "heads", "mark", "author", "committer", "data",
        "from", "m", "inline", "reset", "hard", "printf", "s", "n", "py", "txt", "cfg"}
    seen = {split: set().union(*(words(t["prompt"] + t["setup"]["script"]) for t in git_tasks()
                                 if t["split"] == split)) for split in ("train", "test")}
    assert seen["train"] & set(git_repos.WORDS["train"]) and seen["test"] & set(git_repos.WORDS["test"])
    assert seen["train"] & seen["test"] <= scaffold


def test_no_answer_is_in_its_prompt_and_a_chore_is_judged_by_state_only():
    for task in git_tasks():
        if task["family"] == "branch_commit":
            assert set(task["checks"]) == {"state"}
            continue
        assert set(task["checks"]) == {"answer"}
        assert normalise(task["checks"]["answer"]) not in normalise(task["prompt"]), task["id"]


@pytest.fixture(scope="module")
def git_env():
    env = make_env(gt.SERVER, list(git_tasks()))
    yield env
    env.close()


def test_every_oracle_solves_every_held_out_task_and_nothing_shows_the_answer(git_env):
    held_out = [t for t in git_tasks() if t["split"] == "test"]
    rewards = {}
    for task in held_out:
        reward, info, seen = play(git_env, task["id"], gt.solve)
        rewards[task["id"]] = (reward, info["checks"])
        if "answer" in task["checks"]:
            assert task["checks"]["answer"] not in seen, task["id"]
    assert all(reward == 1.0 for reward, _ in rewards.values()), rewards
