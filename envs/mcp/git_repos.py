"""Deterministic git repositories for MCP-v0's git tasks (agentrl.mcp.git_tasks).

A repository is drawn by a seeded generator from the words of one split only: train and test share no
word, so no file, line, commit message, branch or author of a test repository was ever seen in a train
one. It exists twice: as a `Repo` model, from which the task families read their expected answers,
and as the bash setup script that builds it in an episode's workspace (one `git fast-import`). The
script fixes every name, email and date and reads no global or system git configuration, so each run
makes the same commits with the same hashes, which `build` computes as git does.
"""

from __future__ import annotations

import hashlib
import random
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone

# Content words, disjoint between the splits (tests check it), none a word of the task templates.
WORDS = {
    "train": (
        "otter", "badger", "heron", "falcon", "lynx", "marten", "weasel", "ferret", "beaver",
        "bison", "moose", "walrus", "puffin", "gannet", "plover", "egret", "ibis", "stork", "finch",
        "wren", "robin", "thrush", "lark", "maple", "cedar", "birch", "alder", "aspen", "willow",
        "hazel", "rowan", "spruce", "larch", "juniper", "laurel", "fern", "moss", "clover",
        "thistle", "nettle", "sorrel", "yarrow", "meadow", "orchard",
    ),
    "test": (
        "quartz", "basalt", "granite", "marble", "slate", "shale", "gneiss", "obsidian", "jasper",
        "garnet", "topaz", "beryl", "opal", "onyx", "agate", "cobalt", "nickel", "zinc", "copper",
        "bronze", "pewter", "anvil", "chisel", "lathe", "winch", "pulley", "lever", "piston",
        "gasket", "rivet", "flange", "sprocket", "spindle", "cello", "oboe", "viola", "tuba",
        "lute", "harp", "fiddle", "banjo", "kiln", "forge", "quarry",
    ),
}
AUTHORS = {
    "train": ("Ada Moreno", "Bruno Okafor", "Clara Lindqvist", "Dmitri Vance", "Esther Nakamura",
              "Felix Duarte", "Greta Holm", "Hugo Ferrand", "Iris Takeda", "Jonas Brandt"),
    "test": ("Kamala Osei", "Lorenzo Pike", "Mirela Stan", "Nils Quintero", "Odile Farouk",
             "Pavel Ionescu", "Quinn Adeyemi", "Rosa Kowalczyk", "Samir Lindahl", "Tamsin Rourke"),
}
KINDS = ("txt", "py", "cfg")  # notes, code, key = value settings
# the repository's own identity, which commits made through the server get
MAINTAINER = ("Workspace Maintainer", "maintainer@example.org")


@dataclass(frozen=True)
class Commit:
    """One commit: who and when, its message, the whole tree after it (path -> lines) and the paths it
    added or changed; `hash` is known once the script has run (`build`)."""

    author: str
    email: str
    date: datetime
    message: str
    tree: dict[str, tuple[str, ...]]
    changed: frozenset[str]
    hash: str = ""


@dataclass
class Repo:
    """A repository: `main`'s commits oldest first; side branches, each forked from a main commit
    (`forks`: branch -> index in `main`) with commits of its own; and `pending`, files the script
    leaves modified in the working tree, uncommitted (path -> lines)."""

    split: str
    main: list[Commit]
    branches: dict[str, list[Commit]] = field(default_factory=dict)
    forks: dict[str, int] = field(default_factory=dict)
    pending: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def head(self) -> Commit:
        return self.main[-1]


class Drawer:
    """Draws names, lines and values from one split's words, never the same line or name twice."""

    def __init__(self, split: str, rng: random.Random) -> None:
        self.words = WORDS[split]
        self.rng = rng
        self.used: set[str] = set()

    def fresh(self, make: Callable[[], str]) -> str:
        """A text `make` draws that was not drawn before (a line once removed never comes back, so a
        line names the one commit that introduced it)."""
        while True:
            text = make()
            if text not in self.used:
                self.used.add(text)
                return text

    def word(self) -> str:
        return self.rng.choice(self.words)

    def path(self, kind: str) -> str:
        return self.fresh(lambda: f"{self.word()}_{self.word()}.{kind}")

    def key(self) -> str:
        return self.fresh(lambda: f"{self.word()}_{self.word()}")

    def value(self) -> str:
        return self.fresh(lambda: f"{self.word()}-{self.rng.randint(10, 999)}")

    def line(self, kind: str) -> str:
        if kind == "cfg":
            return f"{self.key()} = {self.value()}"
        if kind == "py":
            return self.fresh(lambda: f"{self.word()}_{self.word()} = {self.rng.randint(2, 9999)}")
        return self.fresh(lambda: " ".join(self.word() for _ in range(3)) + f" {self.rng.randint(2, 99)}")

    def message(self) -> str:
        return self.fresh(lambda: " ".join([self.word().capitalize(), self.word(), self.word(), self.word()]))

    def branch(self) -> str:
        return self.fresh(lambda: f"{self.word()}-{self.word()}")


def edit(tree: dict[str, tuple[str, ...]], path: str, draw: Drawer) -> tuple[str, ...]:
    """A new version of one file: a settings file gets a key's new value (or a new key), any other
    file new lines at its end or one line replaced by a new one."""
    lines = list(tree.get(path, ()))
    kind = path.rsplit(".", 1)[1]
    if not lines:
        return tuple(draw.line(kind) for _ in range(draw.rng.randint(3, 5)))
    if kind == "cfg" and draw.rng.random() < 0.75:
        at = draw.rng.randrange(len(lines))
        lines[at] = f"{lines[at].split(' = ')[0]} = {draw.value()}"
    elif draw.rng.random() < 0.6:
        lines.extend(draw.line(kind) for _ in range(draw.rng.randint(1, 3)))
    else:
        lines[draw.rng.randrange(len(lines))] = draw.line(kind)
    return tuple(lines)


def next_commit(parent: dict[str, tuple[str, ...]], date: datetime, draw: Drawer, authors: tuple[str, ...],
                new_file: bool) -> Commit:
    """A commit on top of `parent`'s tree: one or two files edited, or a file added."""
    tree = dict(parent)
    if not tree:
        paths = [draw.path(kind) for kind in (*KINDS, draw.rng.choice(KINDS))]
    elif new_file:
        paths = [draw.path(draw.rng.choice(KINDS))]
    else:
        paths = draw.rng.sample(sorted(tree), k=min(len(tree), draw.rng.choice((1, 1, 2))))
    for path in paths:
        tree[path] = edit(tree, path, draw)
    author = draw.rng.choice(authors)
    email = author.lower().replace(" ", ".") + "@example.org"
    return Commit(author, email, date, draw.message(), tree, frozenset(paths))


def draw_repo(split: str, seed: str, *, commits: int = 12, side_branches: int = 5, pending: int = 0) -> Repo:
    """A repository of `split`'s words from `seed`: `commits` on main (the first adds four files),
    `side_branches` branches of one or two commits each, `pending` files modified and left uncommitted."""
    rng = random.Random(f"git-repo:{split}:{seed}")
    draw = Drawer(split, rng)
    authors = AUTHORS[split]  # all ten: a guess among the names in the log is seldom right
    date = datetime(rng.randint(2016, 2023), rng.randint(1, 12), rng.randint(1, 28), rng.randint(8, 18),
                    tzinfo=timezone.utc)
    main: list[Commit] = []
    for number in range(commits):
        date += timedelta(days=rng.randint(1, 9), minutes=rng.randint(0, 600))
        main.append(next_commit(main[-1].tree if main else {}, date, draw, authors,
                                new_file=number > 0 and rng.random() < 0.15))
    repo = Repo(split, main)
    for _ in range(side_branches):
        name, fork = draw.branch(), rng.randrange(1, commits)
        own: list[Commit] = []
        when = main[fork].date
        for _ in range(rng.randint(1, 2)):
            when += timedelta(hours=rng.randint(1, 40))
            own.append(next_commit(own[-1].tree if own else main[fork].tree, when, draw, authors,
                                   new_file=rng.random() < 0.3))
        repo.branches[name], repo.forks[name] = own, fork
    for path in rng.sample(sorted(repo.head.tree), k=pending):
        repo.pending[path] = repo.head.tree[path] + (draw.line(path.rsplit(".", 1)[1]),)
    return repo


def _data(text: str) -> str:
    return f"data {len(text.encode())}\n{text}\n"


def _stream(repo: Repo) -> str:
    """The repository as a `git fast-import` stream: one git process makes every commit."""
    parts: list[str] = []
    marks: dict[int, int] = {}  # id(commit) -> its mark

    def add(ref: str, commit: Commit, parent: Commit | None) -> None:
        marks[id(commit)] = mark = len(marks) + 1
        parts.append(f"commit {ref}\nmark :{mark}\nauthor {_who(commit)}\ncommitter {_who(commit)}\n")
        parts.append(_data(commit.message + "\n"))
        if parent is not None:
            parts.append(f"from :{marks[id(parent)]}\n")
        for path in sorted(commit.changed):
            parts.append(f"M 100644 inline {path}\n" + _data(_text(commit.tree[path])))

    for parent, commit in zip([None, *repo.main], repo.main, strict=False):
        add("refs/heads/main", commit, parent)
    for name, own in repo.branches.items():
        for parent, commit in zip([repo.main[repo.forks[name]], *own], own, strict=False):
            add(f"refs/heads/{name}", commit, parent)
    return "".join(parts)


def setup_script(repo: Repo) -> str:
    """The bash script that builds `repo` as ./repo of the current directory, main checked out."""
    lines = [
        "set -eu",
        "export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1",
        "git init -q -b main repo",
        "cd repo",
        f"git config user.name {shlex.quote(MAINTAINER[0])}",
        f"git config user.email {MAINTAINER[1]}",
        "git fast-import --quiet <<'END_OF_HISTORY'",
        _stream(repo) + "END_OF_HISTORY",
        "git reset -q --hard main",
    ]
    lines += [f"printf '%s\\n' {' '.join(shlex.quote(line) for line in repo.pending[p])} > {shlex.quote(p)}"
              for p in sorted(repo.pending)]
    return "\n".join(lines) + "\n"


def _object_id(kind: str, body: bytes) -> bytes:
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).digest()


def _text(lines: tuple[str, ...]) -> str:
    return "".join(f"{line}\n" for line in lines)


def _who(commit: Commit) -> str:
    return f"{commit.author} <{commit.email}> {int(commit.date.timestamp())} +0000"


def commit_id(commit: Commit, parent: str | None) -> str:
    """The hash git gives `commit` on `parent` (hex): objects are hashed as git hashes them, the tree
    flat (every file at the top, mode 100644, in name order), the commit as `git fast-import` writes it."""
    tree = b"".join(b"100644 " + path.encode() + b"\0" + _object_id("blob", _text(commit.tree[path]).encode())
                    for path in sorted(commit.tree))
    body = f"tree {_object_id('tree', tree).hex()}\n" + (f"parent {parent}\n" if parent else "")
    body += f"author {_who(commit)}\ncommitter {_who(commit)}\n\n{commit.message}\n"
    return _object_id("commit", body.encode()).hex()


def _chain(commits: list[Commit], parent: str | None) -> list[Commit]:
    """`commits`, each on the one before (the first on `parent`), with their hashes."""
    built: list[Commit] = []
    for commit in commits:
        built.append(replace(commit, hash=commit_id(commit, built[-1].hash if built else parent)))
    return built


def build(repo: Repo) -> Repo:
    """`repo` with every commit's hash, as the setup script's `git fast-import` makes it (tests check)."""
    main = _chain(repo.main, None)
    branches = {name: _chain(own, main[repo.forks[name]].hash) for name, own in repo.branches.items()}
    return Repo(repo.split, main, branches, dict(repo.forks), dict(repo.pending))
