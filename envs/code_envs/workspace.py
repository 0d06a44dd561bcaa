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
# Run one-shot in the workspace: every entry's kind, mode and link target, then a content hash of every
# file up to MAX_HASHED bytes, all NUL-separated. Times are left out (a replay runs later), and so are
# the entries that hold only times or caches of other files: git's index (stat data) and reflogs, and
# Python's __pycache__ (source mtimes). find and sha256sum cost a quarter of a Python walk.
MAX_HASHED_KIB = 64 << 10
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
    out = sandbox.exec(
        LISTING_COMMAND, timeout_s=LISTING_TIMEOUT_S, mode="oneshot", max_output_bytes=LISTING_MAX_BYTES
    )
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
