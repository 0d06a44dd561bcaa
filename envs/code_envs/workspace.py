"""Seeded workspaces as plain file trees, so a task is data until the moment it is uploaded, and the
listing that tells what a step changed in one.

A workspace is `{relative path: WorkspaceFile}`; it becomes one tar archive (modes kept) that the
sandbox unpacks into the working directory in a single call, however many files there are.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrl.sandbox_server import ExecResult, Sandbox

# Files belong to the sandbox's unprivileged user (uid/gid 1000), so the agent can edit and chmod them.
OWNER_ID = 1000
# A fixed timestamp keeps the archive (and `ls -l` inside the container) identical for the same seed.
FIXED_MTIME = 1_700_000_000


@dataclass(frozen=True)
class WorkspaceFile:
    content: str | bytes
    mode: int = 0o644

    def data(self) -> bytes:
        return self.content.encode() if isinstance(self.content, str) else self.content


FileTree = dict[str, WorkspaceFile]


def files(tree: Mapping[str, str | bytes | WorkspaceFile]) -> FileTree:
    """Accept plain strings for the common case of an ordinary 0644 file."""
    return {p: v if isinstance(v, WorkspaceFile) else WorkspaceFile(v) for p, v in tree.items()}


def tar_bytes(tree: FileTree) -> bytes:
    """One uncompressed tar of the tree; parent directories are created implicitly by tar."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        directories: set[str] = set()
        for path in sorted(tree):
            parts = path.split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                directories.add("/".join(parts[:depth]))
        for directory in sorted(directories):
            info = tarfile.TarInfo(directory)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            info.mtime = FIXED_MTIME
            info.uid = info.gid = OWNER_ID
            archive.addfile(info)
        for path in sorted(tree):
            item = tree[path]
            data = item.data()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = item.mode
            info.mtime = FIXED_MTIME
            info.uid = info.gid = OWNER_ID
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


# --- what is in the workspace now, for telling replayed steps apart ------------------------------------
# Every entry's kind, mode and link target, then a content hash of every file up to MAX_HASHED bytes,
# all NUL-separated, as `find -printf '%y%m\t%l\t%p\0'` and `sha256sum -z` print them. Times are left
# out (a replay runs later), and so are the entries that hold only times or caches of other files:
# git's index (stat data) and reflogs, and Python's __pycache__ (source mtimes).
# The walk is a Python script because the sandbox runs one in a fork of its pre-started interpreter:
# no program starts, where the same listing by `sh`, `find` and `sha256sum` starts three, which is
# most of its cost on a busy machine. It runs one-shot as the sandbox's user, like any command, so the
# session shell's state (functions, PATH, traps) cannot change what it reports. Where the script
# cannot finish (a tree too deep for its paths, say) the same listing by find is taken instead.
MAX_HASHED_KIB = 64 << 10
MAX_HASHED = (MAX_HASHED_KIB - 1) << 10  # what find's `-size -{MAX_HASHED_KIB}k` lets through
LISTING_SCRIPT = f"""
import errno, hashlib, os, stat, sys
PRUNED = {{"./.git/index", "./.git/logs"}}
GONE = (errno.ENOENT, errno.ENOTDIR)  # removed while the walk ran, by something the agent left running
out = []
def describe(path, dev):
    try:
        st = os.lstat(path)
    except OSError as exc:
        if exc.errno in GONE:
            return None
        raise
    m = st.st_mode
    kind = "d" if stat.S_ISDIR(m) else "f" if stat.S_ISREG(m) else "l" if stat.S_ISLNK(m) else \\
        "p" if stat.S_ISFIFO(m) else "s" if stat.S_ISSOCK(m) else "c" if stat.S_ISCHR(m) else \\
        "b" if stat.S_ISBLK(m) else "U"
    target = os.fsencode(os.readlink(path)) if kind == "l" else b""
    out.append(b"%s%o\\t%s\\t%s\\0" % (kind.encode(), stat.S_IMODE(m), target, os.fsencode(path)))
    if kind == "f" and st.st_size <= {MAX_HASHED}:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:  # unreadable to the user (sha256sum skips it too), or gone
            if exc.errno in (*GONE, errno.EACCES, errno.ELOOP, errno.ENXIO):
                return None
            raise
        with open(fd, "rb") as f:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                digest = hashlib.file_digest(f, "sha256").hexdigest()
                out.append(b"%s  %s\\0" % (digest.encode(), os.fsencode(path)))
    return kind == "d" and st.st_dev == dev
root = os.lstat(".").st_dev
stack = ["."]
while stack:
    path = stack.pop()
    if not describe(path, root):
        continue
    try:
        names = os.listdir(path)
    except OSError as exc:  # unreadable to the user: listed, not entered, as find does
        if exc.errno in (*GONE, errno.EACCES):
            continue
        raise
    stack.extend(f"{{path}}/{{n}}" for n in names if n != "__pycache__" and f"{{path}}/{{n}}" not in PRUNED)
sys.stdout.buffer.write(b"".join(out))
"""
LISTING_COMMAND = (
    "find . -xdev \\( -path ./.git/index -o -path ./.git/logs -o -name __pycache__ \\) -prune -o "
    "-printf '%y%m\\t%l\\t%p\\0' "
    f"\\( -type f -size -{MAX_HASHED_KIB}k -exec sha256sum -z -- {{}} + \\); exit 0"
)
LISTING_TIMEOUT_S = 20.0
LISTING_MAX_BYTES = 4 << 20
MAX_CHANGES_KEPT = 256  # paths one step's record lists; beyond that it keeps a count and a digest
_HASHED = re.compile(r"([0-9a-f]{64})  (.*)", re.S)


def listing(sandbox: Sandbox) -> dict[str, str] | str:
    """{path: description} of everything in the workspace (e.g. "f644:3f1c...", "d755",
    "l777:target"), or why it could not be read."""
    out = sandbox.run_code(
        LISTING_SCRIPT, "python", timeout_s=LISTING_TIMEOUT_S, max_output_bytes=LISTING_MAX_BYTES
    )
    if out.status == "error":  # the script met what it does not handle; find does
        out = sandbox.exec(
            LISTING_COMMAND, timeout_s=LISTING_TIMEOUT_S, mode="oneshot", max_output_bytes=LISTING_MAX_BYTES
        )
    return read_listing(out)


def read_listing(out: ExecResult) -> dict[str, str] | str:
    """The listing in the output of LISTING_SCRIPT or LISTING_COMMAND, or why there is none."""
    if out.status != "ok" or out.truncated:
        return f"workspace listing {out.status}{', truncated' if out.truncated else ''}"
    entries: dict[str, str] = {}
    for field in out.stdout.split("\0"):
        if hashed := _HASHED.fullmatch(field):
            path = hashed.group(2).removeprefix("./")
            entries[path] = entries.get(path, "?") + ":" + hashed.group(1)[:16]
        elif field.count("\t") >= 2:
            kind, target, path = field.split("\t", 2)
            path = path.removeprefix("./")
            entries[path] = f"{kind}:{target}" if kind.startswith("l") else kind
    return entries


def changes(before: dict[str, str] | str, after: dict[str, str] | str) -> dict[str, Any]:
    """What changed in the workspace between two listings: each path's new description (None when it
    is gone), or a count and a digest when many changed, or why a listing is missing."""
    if isinstance(before, str) or isinstance(after, str):
        return {"unavailable": after if isinstance(after, str) else before}
    changed = {p: after.get(p) for p in sorted(before.keys() | after.keys()) if before.get(p) != after.get(p)}
    if len(changed) <= MAX_CHANGES_KEPT:
        return {"changed": changed}
    digest = hashlib.sha256(json.dumps(changed, sort_keys=True).encode()).hexdigest()[:16]
    return {"changed_paths": len(changed), "digest": digest}
