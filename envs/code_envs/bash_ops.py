"""Bash-v0's shell families: fix a broken script, repair permissions, and git work.

As in `bash_tasks`, names, contents, bugs and questions come from the RNG and verdicts are computed
on the host. Git state is read with plumbing commands under `judge.GIT` (no hooks, fsmonitor,
pager, signatures or replace objects) and compared with commit hashes computed here from the same
history the setup imports, so nothing the agent writes into `.git` can make a wrong state look right.
"""

from __future__ import annotations

import hashlib
import random
import shlex
from typing import Any, NamedTuple

from agentrl.code_envs.judge import (
    answer_is,
    git_facts,
    modes_are,
    oneshot,
    progress,
    read_text,
    text_file_equals,
)
from agentrl.code_envs.tasks import Builder, Grade, Task, call
from agentrl.code_envs.vocab import slug, word, words
from agentrl.code_envs.workspace import WorkspaceFile, files

SCRIPT = """#!/usr/bin/env bash
# {what} of every .{ext} file in {indir}/, one line each, sorted by name.
set -euo pipefail
out={out}
: > "$out"
for f in {indir}/*.{ext}; do
    n=$(wc -{flag} < "$f")
    echo "$(basename "$f" .{ext}){sep}$n" >> "$out"
done
"""
METRICS = {"l": "number of lines", "w": "number of words", "c": "number of bytes"}


def _metric(flag: str, text: str) -> int:
    return {"l": text.count("\n"), "w": len(text.split()), "c": len(text.encode())}[flag]


def fix_script(rng: random.Random, split: str) -> Task:
    indir, ext, flag = word(rng) + "_in", rng.choice(("txt", "dat", "log")), rng.choice(tuple(METRICS))
    out, sep, name = f"{word(rng)}_report.txt", rng.choice((" ", ": ", ",", " = ")), f"scripts/{slug(rng)}.sh"
    good = SCRIPT.format(what=METRICS[flag], ext=ext, indir=indir, out=out, flag=flag, sep=sep)
    other = rng.choice([f for f in METRICS if f != flag])
    bugs = [
        (f"*.{ext}; do", f"*.{ext}s; do"),
        ('< "$f")', '< "$file")'),
        ("\ndone\n", "\n"),
        ('>> "$out"', '> "$out"'),
        (f"wc -{flag}", f"wc -{other}"),
        (f'basename "$f" .{ext}', 'basename "$f"'),
    ]
    old, new = rng.choice(bugs)
    broken = good.replace(old, new, 1)
    assert broken != good, old  # every bug pattern occurs in the template
    inputs = {
        f"{indir}/{n}.{ext}": "".join(rng.choices(("a b\n", "word\n", "x y z\n", "\n"), k=rng.randint(1, 25)))
        for n in words(rng, rng.randint(3, 6))
    }
    # The check adds an input the agent never saw, so only a general script passes.
    extra_name = f"{word(rng)}{rng.randint(100, 999)}"
    extra = "".join(rng.choices(("a b\n", "word\n", "x y z\n"), k=rng.randint(1, 9)))
    every = {**inputs, f"{indir}/{extra_name}.{ext}": extra}
    stem = {p: p.rsplit("/", 1)[1].removesuffix(f".{ext}") for p in every}
    expected = "".join(
        f"{stem[p]}{sep}{_metric(flag, every[p])}\n" for p in sorted(every, key=stem.__getitem__)
    )

    def check(sandbox, _answer) -> Grade:
        q = shlex.quote
        oneshot(sandbox, f"cat > {q(f'{indir}/{extra_name}.{ext}')} && rm -f -- {q(out)}", stdin=extra)
        oneshot(sandbox, f"bash {q(name)} >/dev/null 2>&1", timeout_s=10)
        return text_file_equals(out, expected)(sandbox, None)

    return Task(
        "fix_script",
        f"{name} should write {out}: for every {indir}/*.{ext} file, a line NAME{sep}COUNT (NAME is the file "
        f"name without .{ext}, COUNT its {METRICS[flag]} as `wc -{flag}` counts them), sorted by name. Run "
        f"from the workspace as `bash {name}`, it does not work. Fix the script (keep it general: it must "
        "work "
        f"for any files in {indir}/), then finish.",
        {**files(inputs), name: WorkspaceFile(broken, 0o755)},
        check,
        (
            call("write_file", path=name, content=good),
            call("execute_bash", command=f"bash {name} && cat {out}"),
            call("finish", answer=""),
        ),
    )


def permissions(rng: random.Random, split: str) -> Task:
    bin_dir, key_dir, pub_dir = (
        f"{w}_{kind}" for w, kind in zip(words(rng, 3), ("bin", "keys", "www"), strict=True)
    )
    groups = (
        (bin_dir, "sh", rng.choice((0o755, 0o750, 0o700)), (0o644, 0o600, 0o744, 0o640)),
        (key_dir, "key", rng.choice((0o600, 0o400, 0o640)), (0o644, 0o666, 0o664, 0o604)),
        (pub_dir, "html", rng.choice((0o644, 0o444, 0o664)), (0o666, 0o646, 0o600, 0o640)),
    )
    tree: dict[str, WorkspaceFile] = {}
    expected: dict[str, int] = {}
    initial: dict[str, int] = {}
    for folder, ext, target, wrong in groups:
        for i, n in enumerate(words(rng, rng.randint(2, 5))):
            mode = rng.choice(wrong) if i == 0 or rng.random() < 0.6 else target  # one wrong at least
            tree[f"{folder}/{n}.{ext}"] = WorkspaceFile(f"{n} {rng.random()}\n", mode)
            expected[f"{folder}/{n}.{ext}"], initial[f"{folder}/{n}.{ext}"] = target, mode
    rules = ", ".join(f"every {d}/*.{e} file mode {oct(t)[2:]}" for d, e, t, _ in groups)
    fix = " && ".join(f"chmod {oct(t)[2:]} {d}/*.{e}" for d, e, t, _ in groups)
    return Task(
        "permissions",
        f"Repair the permissions in the workspace: {rules}. Do not move, replace or delete files. "
        "Then finish.",
        tree,
        modes_are([bin_dir, key_dir, pub_dir], expected, initial),
        (call("execute_bash", command=fix), call("finish", answer="")),
    )


# --- git ------------------------------------------------------------------------------------------
IDENTITY = "dev <dev@example.invalid> 1704067200 +0000"
GIT_SETUP = (
    "git init -q -b main . && git config user.name dev && git config user.email dev@example.invalid && "
    "git fast-import --quiet && git reset -q --hard main"
)
GIT_REPO = "The workspace is a git repository. "  # how every git task's prompt begins
History = list[tuple[str, dict[str, str]]]  # (subject, full tree) per commit, oldest first


def fast_import(commits: History) -> str:
    """A `git fast-import` stream: one process builds the whole repository, with fixed dates."""

    def data(text: str) -> str:
        return f"data {len(text.encode())}\n{text}\n"

    out = []
    for subject, tree in commits:
        out.append(f"commit refs/heads/main\nauthor {IDENTITY}\ncommitter {IDENTITY}\n" + data(subject))
        out.append("deleteall\n")
        out.extend(f"M 100644 inline {p}\n" + data(c) for p, c in sorted(tree.items()))
    return "".join(out)


def _object(kind: str, body: bytes) -> str:
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).hexdigest()  # git's own object hash


def tree_hash(tree: dict[str, str]) -> str:
    """The git tree id of a {path: text} tree, computed here (blobs 100644, subtrees 40000)."""
    nested: dict[str, Any] = {}  # a folder's entries: text, or a folder's entries
    for path, text in tree.items():
        *dirs, name = path.split("/")
        node = nested
        for d in dirs:
            node = node.setdefault(d, {})
        node[name] = text

    def walk(node: dict) -> str:
        entries = []
        for name, child in node.items():
            if isinstance(child, dict):
                entries.append((name + "/", b"40000 " + name.encode() + b"\0" + bytes.fromhex(walk(child))))
            else:
                sha = _object("blob", child.encode())
                entries.append((name, b"100644 " + name.encode() + b"\0" + bytes.fromhex(sha)))
        return _object("tree", b"".join(e for _, e in sorted(entries)))

    return walk(nested)


def commit_hashes(commits: History) -> list[str]:
    hashes: list[str] = []
    for subject, tree in commits:
        parent = f"parent {hashes[-1]}\n" if hashes else ""
        body = f"tree {tree_hash(tree)}\n{parent}author {IDENTITY}\ncommitter {IDENTITY}\n\n{subject}"
        hashes.append(_object("commit", body.encode()))
    return hashes


class GitHistory(NamedTuple):
    """A drawn history of the workspace's repository, and what its git tasks ask about."""

    config: str  # the settings file: one line added per commit
    doc: str  # the notes file: changed by some commits
    token: str  # the line one commit (`culprit`) added to `config`
    subjects: list[str]  # the commits' subject lines, oldest first
    culprit: int
    doc_changes: int  # how many commits changed `doc`
    head_tree: dict[str, str]  # the last commit's files
    main: str  # the last commit's hash (main's head)
    stdin: str  # the history as `git fast-import` reads it (`GIT_SETUP`)


def git_ops(rng: random.Random, split: str) -> Task:
    """One of four tasks on a drawn history: which commit added a line, how many commits changed a
    file, a branch with one new commit, or discarding uncommitted edits."""
    history = _git_history(rng)
    asks = (_which_commit, _how_many_commits, _branch_and_commit, _discard_edits)
    return asks[rng.randrange(len(asks))](rng, history)


def _git_history(rng: random.Random) -> GitHistory:
    config, doc = f"src/{word(rng)}.cfg", f"docs/{slug(rng, '-')}.md"
    token = f"{word(rng)}_limit={rng.randint(100, 999)}"
    verbs = ("Tune", "Adjust", "Update", "Refine", "Bump", "Tweak", "Rework", "Polish")
    subjects = list(
        dict.fromkeys(f"{rng.choice(verbs)} {word(rng)} {word(rng)}" for _ in range(rng.randint(4, 8)))
    )
    culprit = rng.randrange(1, len(subjects))
    text, notes, commits, doc_changes = "# settings\n", "# notes\n", [], 0
    for i, subject in enumerate(subjects):
        text += (token if i == culprit else f"{word(rng)}_opt{i}={rng.randint(0, 9)}") + "\n"
        if i == 0 or rng.random() < 0.5:
            notes += f"- {word(rng)} {word(rng)}\n"
            doc_changes += 1
        commits.append((subject, {config: text, doc: notes, "README.md": f"{slug(rng, ' ')}\n"}))
    return GitHistory(config, doc, token, subjects, culprit, doc_changes, commits[-1][1],
                      commit_hashes(commits)[-1], fast_import(commits))


def _which_commit(rng: random.Random, history: GitHistory) -> Task:
    subject = history.subjects[history.culprit]
    return Task(
        "git_ops",
        GIT_REPO
        + f"Which commit added the line '{history.token}' to {history.config}? Answer with that commit's "
        "subject line.",
        files({}),
        answer_is(subject),
        (
            call("execute_bash", command=f"git log -S {shlex.quote(history.token)} --format=%s"),
            call("finish", answer=subject),
        ),
        setup=GIT_SETUP,
        setup_stdin=history.stdin,
        answer=subject,
    )


def _how_many_commits(rng: random.Random, history: GitHistory) -> Task:
    doc, doc_changes = history.doc, history.doc_changes
    return Task(
        "git_ops",
        GIT_REPO + f"How many commits changed {doc}? Answer with the number only.",
        files({}),
        answer_is(doc_changes),
        (
            call("execute_bash", command=f"git log --format=%h -- {doc} | wc -l"),
            call("finish", answer=str(doc_changes)),
        ),
        setup=GIT_SETUP,
        setup_stdin=history.stdin,
        answer=str(doc_changes),
    )


def _branch_and_commit(rng: random.Random, history: GitHistory) -> Task:
    branch, note = f"feature/{slug(rng, '-')}", f"notes/{word(rng)}.txt"
    message, content = f"Add {note} for {word(rng)}", f"{slug(rng, ' ')} {rng.randint(0, 10**6)}\n"
    ref, main = f"refs/heads/{branch}", history.main

    def committed(sandbox, _answer) -> Grade:
        facts = git_facts(
            sandbox,
            [
                "rev-parse --verify refs/heads/main",
                f"rev-parse --verify {ref}^",
                f"log -1 --format=%s {ref}",
                f"cat-file blob {ref}:{note}",
            ],
        )
        wanted = [main + "\n", main + "\n", message + "\n", content]
        held = [True, False, False, False]  # main was right at the start; the branch did not exist
        return progress(
            [(f == w, h) for f, w, h in zip(facts, wanted, held, strict=True)], f"git: {facts}"
        )

    return Task(
        "git_ops",
        GIT_REPO
        + f"Create a branch named {branch} from main and commit the untracked file {note} on it (one "
        f"commit), with the commit message '{message}'. Leave main unchanged.",
        files({note: content}),
        committed,
        (
            call(
                "execute_bash",
                command=f"git checkout -q -b {branch} && git add {note} && "
                f"git commit -q -m {shlex.quote(message)}",
            ),
            call("finish", answer=""),
        ),
        setup=GIT_SETUP,
        setup_stdin=history.stdin,
    )


def _discard_edits(rng: random.Random, history: GitHistory) -> Task:
    config, doc, head_tree, main = history.config, history.doc, history.head_tree, history.main
    head = tree_hash(head_tree)

    def restored(sandbox, _answer) -> Grade:
        facts = git_facts(sandbox, ["rev-parse --verify HEAD", "write-tree"])
        same = all(read_text(sandbox, p) == c for p, c in head_tree.items())
        # HEAD was right at the start (a regression if moved); files and index were not
        return progress(
            [(same, False), (facts[0] == main + "\n", True), (facts[1] == head + "\n", False)],
            f"git: {facts}",
        )

    return Task(
        "git_ops",
        GIT_REPO
        + f"It has uncommitted edits to {config}, {doc} and README.md, some staged. Discard all uncommitted "
        "changes to tracked files so that the index and the working tree match the last commit, then finish.",
        files({}),
        restored,
        (
            call("execute_bash", command="git reset -q --hard HEAD && git status --short"),
            call("finish", answer=""),
        ),
        setup=GIT_SETUP + f" && echo {word(rng)} >> {config} && echo {word(rng)} >> {doc} && git add {doc} "
        f"&& echo {word(rng)} >> README.md",
        setup_stdin=history.stdin,
    )


FAMILIES: dict[str, Builder] = {
    "fix_script": fix_script,
    "permissions": permissions,
    "git_ops": git_ops,
}
