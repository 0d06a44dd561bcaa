"""What a file path or a tar member may be: relative, inside the workspace, of a sane length."""

from __future__ import annotations

import posixpath
import tarfile
from typing import IO

from agentrl.sandbox_server.wire.errors import InvalidRequest
from agentrl.sandbox_server.wire.models import WORKDIR

MAX_PATH_BYTES = 1024
MAX_NAME_BYTES = 255
MAX_DEPTH = 64


def check_path(path: str) -> str:
    """`path` normalised, or `InvalidRequest` (HTTP 400) when it is absolute, climbs out with `..`,
    holds a NUL, or is too long or too deep. Files are always relative to the workspace."""
    if not isinstance(path, str) or not path or "\0" in path:
        raise InvalidRequest("a file path must be a non-empty string without NUL")
    if path.startswith("/"):
        raise InvalidRequest(f"absolute path {path[:80]!r}: file paths are relative to {WORKDIR}")
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise InvalidRequest(f"path {path[:80]!r} climbs out of the workspace with '..'")
    if len(path.encode()) > MAX_PATH_BYTES or len(parts) > MAX_DEPTH:
        raise InvalidRequest(f"path too long: at most {MAX_PATH_BYTES} bytes and {MAX_DEPTH} levels")
    if any(len(part.encode()) > MAX_NAME_BYTES for part in parts):
        raise InvalidRequest(f"a path component is over {MAX_NAME_BYTES} bytes")
    return "/".join(parts) or "."


def check_tar(source: IO[bytes], path: str) -> None:
    """Refuse a whole archive (`InvalidRequest`) if any member would land outside `path` in the
    workspace, link outside it, or is a device or FIFO (tarfile's `data` filter, applied here)."""
    dest = posixpath.join(WORKDIR, path)
    try:
        with tarfile.open(fileobj=source, mode="r:*") as tar:
            for member in tar:
                if member.name.startswith("/") or ".." in member.name.split("/"):
                    raise InvalidRequest(
                        f"tar member {member.name[:80]!r} is absolute or climbs out with '..'"
                    )
                if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
                    raise InvalidRequest(f"tar member {member.name[:80]!r} is not a file, directory or link")
                try:
                    tarfile.data_filter(member, dest)
                except tarfile.FilterError as exc:
                    raise InvalidRequest(f"tar member refused: {exc}") from None
    except tarfile.TarError as exc:
        raise InvalidRequest(f"not a tar archive: {exc}") from None
