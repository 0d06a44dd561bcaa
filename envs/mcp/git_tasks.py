"""MCP-v0's git tasks: seeded questions and chores over deterministic repositories (agentrl.mcp.git_repos),
played through the real `mcp-server-git`, and each family's oracle.

Families (`FAMILIES`): which commit introduced a line (`blame`: the hash), which files differ between
two commits (`diff_files`), the author, date or message of the last commit that changed a file
(`author`, `date`, `message`), which branch holds a commit (`branch_of`), a setting's value at an old
commit (`value_at`), and a chore judged on the repository afterwards (`branch_commit`: branch off main
and commit one of two uncommitted changes). Each task has a repository of its own, drawn from its
split's words only, so train and test share no content. Answers are exact (after MCP-v0's
normalisation): a list of names must be whole, one of many hashes is no answer. No answer appears in
its prompt, and the chore's checks read what only that commit can show.

An oracle (`solve`) plays a task as an agent would: from the prompt and the server's answers alone,
never from the task's checks. Its parameters are the prompt's backquoted values, in template order
(`prompt_values`).

    python -m agentrl.mcp.git_tasks --out tasks.jsonl [--count 24 --seed 0]
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agentrl.mcp.families import CallTool, prompt_values, write_cli
from agentrl.mcp.git_repos import WORDS, Commit, Repo, build, draw_repo, setup_script

REPO = "{workspace}/repo"
SERVER = ["mcp-server-git", "--repository", REPO]
FAMILIES = ("blame", "diff_files", "author", "date", "message", "branch_of", "value_at", "branch_commit")
IN_REPO = "In the git repository at `{repo}`, "
PROMPTS = {
    "blame": IN_REPO + "which commit introduced the line `{}` in `{}`? Answer with the commit's full "
                       "40-character hash.",
    "diff_files": IN_REPO + "which files differ between commit `{}` and commit `{}`? Answer with their paths "
                            "sorted alphabetically and separated by a comma and a space.",
    "author": IN_REPO + "who wrote the most recent commit on main that changed `{}`? Answer with the "
                        "author's name.",
    "date": IN_REPO + "on which day was the most recent commit on main that changed `{}` authored? Answer "
                      "as YYYY-MM-DD.",
    "message": IN_REPO + "what is the message of the most recent commit on main that changed `{}`? Answer "
                         "with the message exactly.",
    "branch_of": IN_REPO + "commit `{}` is not on main. Which local branch contains it? Answer with the "
                           "branch's name.",
    "value_at": IN_REPO + "what was the value of `{}` in `{}` at commit `{}`? Answer with the value only.",
    "branch_commit": IN_REPO + "the working tree has uncommitted changes to `{}` and `{}`. Create a branch "
                               "named `{}` from main, switch to it and commit only the change to `{}` there, "
                               "with the message `{}`. Leave the other change uncommitted and main where it "
                               "is. Then call finish.",
}


@dataclass
class Posed:
    """A family's question over one repository: the prompt's values, and the checks."""

    values: list[str]
    checks: dict[str, Any] = field(default_factory=dict)


# --- posing: the question and its expected answer, read from the repository's model ---------------------
def _introduced(repo: Repo) -> list[tuple[str, str, str]]:
    """(hash, path, line) for each line a main commit after the first added and main still has."""
    found = []
    for before, commit in zip(repo.main, repo.main[1:], strict=False):
        for path in sorted(commit.changed):
            old = set(before.tree.get(path, ()))
            found += [(commit.hash, path, line) for line in commit.tree[path]
                      if line not in old and line in repo.head.tree.get(path, ())]
    return found


def _last_change(repo: Repo, path: str) -> Commit:
    return next(c for c in reversed(repo.main) if path in c.changed)


def _guessed_authors(repo: Repo) -> set[str]:
    """The names a guess would give without finding the commit: the newest two commits' authors and
    main's most frequent one."""
    authors = [c.author for c in repo.main]
    return {*authors[-2:], max(sorted(set(authors)), key=authors.count)}


def pose(family: str, repo: Repo, rng: random.Random) -> Posed | None:
    """The family's question over `repo` (None where the repository offers none)."""
    main, head = repo.main, repo.head
    if family == "blame":
        # not a line of the file's last change: the first commit a guess would look at is no answer
        lines = [(h, p, line) for h, p, line in _introduced(repo) if h != _last_change(repo, p).hash]
        if not lines:
            return None
        commit_hash, path, line = rng.choice(lines)
        return Posed([line, path], {"answer": commit_hash})
    if family == "diff_files":
        a, b = sorted(rng.sample(range(len(main)), 2))
        trees = main[a].tree, main[b].tree
        differ = sorted(p for p in set(trees[0]) | set(trees[1]) if trees[0].get(p) != trees[1].get(p))
        if len(differ) < 2 or len(differ) == len(set(trees[0]) | set(trees[1])):
            return None  # one name is too easy a guess; all of them is no question
        return Posed([main[a].hash, main[b].hash], {"answer": ", ".join(differ)})
    if family in ("author", "date", "message"):
        # a file the last two commits left alone: the top of `git_log` is no answer
        paths = [p for p in sorted(head.tree) if _last_change(repo, p) not in main[-2:]]
        if not paths:
            return None
        last = _last_change(repo, path := rng.choice(paths))
        if family == "author" and last.author in _guessed_authors(repo):
            return None
        answer = {"author": last.author, "date": last.date.strftime("%Y-%m-%d"), "message": last.message}
        return Posed([path], {"answer": answer[family]})
    if family == "branch_of":
        name = rng.choice(sorted(repo.branches))
        return Posed([rng.choice(repo.branches[name]).hash], {"answer": name})
    if family == "value_at":
        return _pose_value_at(repo, rng)
    if family == "branch_commit":
        return _pose_branch_commit(repo, rng)
    raise ValueError(f"unknown git task family {family!r}; known: {', '.join(FAMILIES)}")


def _pose_value_at(repo: Repo, rng: random.Random) -> Posed | None:
    """A key of a settings file whose value at an old commit is not its value now."""
    now = {(p, line.split(" = ")[0]): line for p, lines in repo.head.tree.items() if p.endswith(".cfg")
           for line in lines}
    old = [(c.hash, p, line) for c in repo.main[:-1] for p, lines in c.tree.items() if p.endswith(".cfg")
           for line in lines if now.get((p, line.split(" = ")[0])) not in (None, line)]
    if not old:
        return None
    commit_hash, path, line = rng.choice(old)
    key, value = line.split(" = ")
    return Posed([key, path, commit_hash], {"answer": value})


def _pose_branch_commit(repo: Repo, rng: random.Random) -> Posed:
    """Commit one of the two uncommitted changes on a new branch: judged by what git shows of the
    branch, its parent and main afterwards. Only the right commit shows the target's new line under
    its path's header with the message; the other change, committed too, shows under its own."""
    target, other = rng.sample(sorted(repo.pending), 2)
    words = WORDS[repo.split]
    branch = next(n for n in (f"{rng.choice(words)}-{rng.choice(words)}" for _ in range(100))
                  if n not in repo.branches)
    message = " ".join([rng.choice(words).capitalize(), *rng.sample(words, 3)])
    head = f"commit {repo.head.hash}\nAuthor: "  # only a header has a newline before "Author:"
    show = [
        {"name": "git_show", "arguments": {"repo_path": REPO, "revision": branch},
         "contains": [f"\n    {message}\n", f"+++ b/{target}\n", f"+{repo.pending[target][-1]}\n"],
         "excludes": [f"+++ b/{other}\n", head]},
        {"name": "git_show", "arguments": {"repo_path": REPO, "revision": f"{branch}~1"}, "contains": [head]},
        {"name": "git_show", "arguments": {"repo_path": REPO, "revision": "main"}, "contains": [head]},
    ]
    return Posed([target, other, branch, target, message], {"state": show})


def make_task(family: str, split: str, seed: int, index: int) -> dict[str, Any]:
    """One task of `family`: a fresh repository, and the family's question over it."""
    for attempt in range(50):
        key = f"{seed}:{index}:{attempt}"
        repo = draw_repo(split, key, pending=2 if family == "branch_commit" else 0)
        posed = pose(family, build(repo), random.Random(f"git-pose:{family}:{split}:{key}"))
        if posed is not None:
            return {
                "id": f"git-{family}-{split}-{index:04d}",
                "family": family,
                "split": split,
                "prompt": PROMPTS[family].format(*posed.values, repo=REPO),
                "setup": {"script": setup_script(repo)},
                "checks": posed.checks,
            }
    raise RuntimeError(f"no {family} question found in 50 repositories for seed {seed}, index {index}")


def make_tasks(count: int = 24, seed: int = 0,
               splits: tuple[str, ...] = ("train", "test")) -> list[dict[str, Any]]:
    """`count` tasks per split, the families in turn."""
    return [make_task(FAMILIES[i % len(FAMILIES)], split, seed, i) for split in splits for i in range(count)]


# --- the oracles --------------------------------------------------------------------------------------
@dataclass
class Shown:
    """What `git_show` prints of a commit: its header, and each changed file's patch lines."""

    hash: str
    author: str
    day: str
    message: str
    patches: dict[str, list[str]]


def parse_show(text: str) -> Shown:
    lines = text.split("\n")
    author = next(line for line in lines if line.startswith("Author: "))[len("Author: "):].split(" <")[0]
    day = next(line for line in lines if line.startswith("Date: "))[len("Date: "):].strip()[:10]
    first_patch = next((i for i, line in enumerate(lines) if line.startswith("--- ")), len(lines))
    message = "\n".join(line[4:] for line in lines[:first_patch] if line.startswith("    "))
    patches: dict[str, list[str]] = {}
    current: list[str] = []
    for before, line in zip(lines[first_patch:], lines[first_patch + 1:], strict=False):
        if before.startswith("--- ") and line.startswith("+++ "):
            path = line[len("+++ b/"):] if line.startswith("+++ b/") else before[len("--- a/"):]
            current = patches.setdefault(path, [])
        else:
            current.append(line)
    return Shown(lines[0].split()[1], author, day, message, patches)


def _log(call: CallTool, repo: str) -> list[str]:
    """Main's commits, newest first."""
    log = call("git_log", {"repo_path": repo, "max_count": 1000})
    return re.findall(r"^Commit: ([0-9a-f]{40})$", log, re.M)


def _shows(call: CallTool, repo: str, newest_first: bool = True) -> Iterator[Shown]:
    """Main's commits as `git_show` prints them, one call each, as they are needed."""
    hashes = _log(call, repo)
    for commit_hash in hashes if newest_first else reversed(hashes):
        yield parse_show(call("git_show", {"repo_path": repo, "revision": commit_hash}))


def solve(task: dict[str, Any], call: CallTool) -> str:
    """Play `task` through the server's tools; the answer to give `finish`."""
    family = task["family"]
    repo, *values = prompt_values(task["prompt"])
    if family == "blame":
        line, path = values
        oldest_first = _shows(call, repo, newest_first=False)
        return next(s.hash for s in oldest_first if f"+{line}" in s.patches.get(path, ()))
    if family == "diff_files":
        call("git_checkout", {"repo_path": repo, "branch_name": values[0]})
        diff = call("git_diff", {"repo_path": repo, "target": values[1]})
        return ", ".join(sorted(re.findall(r"^diff --git a/(\S+) b/", diff, re.M)))
    if family in ("author", "date", "message"):
        shown = next(s for s in _shows(call, repo) if values[0] in s.patches)
        return {"author": shown.author, "date": shown.day, "message": shown.message}[family]
    if family == "branch_of":
        listing = call("git_branch", {"repo_path": repo, "branch_type": "local", "contains": values[0]})
        (name,) = [n for n in (line.strip(" *") for line in listing.splitlines()) if n and n != "main"]
        return name
    if family == "value_at":
        key, path, commit_hash = values
        text = call("git_show", {"repo_path": repo, "revision": f"{commit_hash}:{path}"})
        return next(line.split(" = ", 1)[1] for line in text.splitlines() if line.split(" = ")[0] == key)
    if family == "branch_commit":
        target, _other, branch, _, message = values
        call("git_create_branch", {"repo_path": repo, "branch_name": branch, "base_branch": "main"})
        call("git_checkout", {"repo_path": repo, "branch_name": branch})
        call("git_add", {"repo_path": repo, "files": [target]})
        call("git_commit", {"repo_path": repo, "message": message})
        return "done"
    raise ValueError(f"unknown git task family {family!r}")


def main(argv: list[str] | None = None) -> None:
    write_cli(argv, "agentrl.mcp.git_tasks", make_tasks, 24)


if __name__ == "__main__":
    main()
