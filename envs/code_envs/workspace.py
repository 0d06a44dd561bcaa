"""Seeded workspaces as plain file trees, so a task is data until the moment it is uploaded.

A workspace is `{relative path: WorkspaceFile}`; it becomes one tar archive (modes kept) that the
sandbox unpacks into the working directory in a single call, however many files there are.
"""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass

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
