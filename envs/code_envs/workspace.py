"""Seeded workspaces as plain file trees, so a task is data until the moment it is uploaded, and the
listing that tells what a step changed in one.

A workspace is `{relative path: WorkspaceFile}`; it becomes one tar archive (modes kept) that the
sandbox unpacks into the working directory in a single call, however many files there are.
"""

from __future__ import annotations

import hashlib
import io
import json
import shlex
import tarfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrl.sandbox_server import Sandbox

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


def files(tree: dict[str, str | bytes | WorkspaceFile]) -> FileTree:
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
# Run one-shot in the workspace: every entry as `path NUL description NUL`, where a description is
# the kind, the mode and, for a file, a hash of its content (a link: its target). Times are left out
# (a replay runs later), and so are the entries that hold only times or caches of other files: git's
# index (stat data) and reflogs, and Python's __pycache__ (source mtimes).
LISTING = r"""
import hashlib, os, stat, sys
SKIP = {"./.git/index", "./.git/logs"}
out = sys.stdout.buffer
def entry(path):
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            return "l:" + os.readlink(path)
        kind = "d" if stat.S_ISDIR(st.st_mode) else "f" if stat.S_ISREG(st.st_mode) else "o"
        text = "%s%o" % (kind, stat.S_IMODE(st.st_mode))
        if kind == "f":
            if st.st_size > MAX_HASHED:
                return text + ":size=%d" % st.st_size
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            text += ":" + digest.hexdigest()[:16]
        return text
    except OSError as exc:
        return "?" + type(exc).__name__
for root, dirs, files in os.walk("."):
    dirs[:] = sorted(d for d in dirs if d != "__pycache__" and os.path.join(root, d) not in SKIP)
    for name in dirs + sorted(f for f in files if os.path.join(root, f) not in SKIP):
        path = os.path.join(root, name)
        out.write(os.fsencode(path[2:]) + b"\0" + entry(path).encode("utf-8", "surrogateescape") + b"\0")
""".replace("MAX_HASHED", str(64 << 20))
LISTING_COMMAND = f"env -i PATH=/usr/local/bin:/usr/bin:/bin python3 -I -S -B -c {shlex.quote(LISTING)}"
LISTING_TIMEOUT_S = 20.0
LISTING_MAX_BYTES = 4 << 20
MAX_CHANGES_KEPT = 256  # paths one step's record lists; beyond that it keeps a count and a digest


def listing(sandbox: Sandbox) -> dict[str, str] | str:
    """{path: description} of everything in the workspace, or why it could not be read."""
    out = sandbox.exec(
        LISTING_COMMAND, timeout_s=LISTING_TIMEOUT_S, mode="oneshot", max_output_bytes=LISTING_MAX_BYTES
    )
    if out.status != "ok" or out.truncated:
        return f"workspace listing {out.status}{', truncated' if out.truncated else ''}"
    fields = out.stdout.split("\0")
    return dict(zip(fields[0:-1:2], fields[1::2], strict=False))


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
