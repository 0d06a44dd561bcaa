"""The in-sandbox agent's file operations (standard library only, shipped as text with main.py).

Every path is relative to the workspace and every component of it is opened relative to the one
before it with O_NOFOLLOW, so a symbolic link on the way (made by the user, or swapped in while
the call runs) is refused, never followed: reads, writes and archives never leave the workspace.
These run as the user (`as_user`), so they hold no more rights than the user's own code.
"""

import contextlib
import os
import shutil
import stat
import tarfile

from agentrl_agent_lib import WORKDIR  # pyright: ignore[reportMissingImports]  # a module only in the sandbox: agent/__init__.py

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
MAX_TREE_DEPTH = 64


class LinkRefused(ValueError):
    """A path goes through a symbolic link: the files API never follows one."""


def _refuse_link(dir_fd, name, shown):
    """Raise LinkRefused if `name` in `dir_fd` is a symbolic link."""
    with contextlib.suppress(OSError):
        if stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            raise LinkRefused(f"{shown!r} is a symbolic link: the files API does not follow links")


def _open_dir(dir_fd, name, shown, create):
    try:
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            raise FileNotFoundError(2, "No such file or directory", shown) from None
    except OSError:
        _refuse_link(dir_fd, name, shown)
        raise
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o755, dir_fd=dir_fd)
    return _open_dir(dir_fd, name, shown, False)


def walk(path, create=False):
    """(fd of the directory holding the last component of `path`, that component): `path` is
    relative to the workspace, and no component on the way is a link; with `create`, missing
    directories are made."""
    parts = [part for part in path.split("/") if part not in ("", ".")]
    fd = os.open(WORKDIR, DIR_FLAGS)
    try:
        for i, part in enumerate(parts[:-1]):
            parent, fd = fd, _open_dir(fd, part, "/".join(parts[: i + 1]), create)
            os.close(parent)
    except BaseException:
        os.close(fd)
        raise
    return fd, (parts[-1] if parts else ".")


def open_in(path, flags, create_dirs=False):
    """An fd of the file at `path` in the workspace opened with `flags`, no link followed."""
    dir_fd, name = walk(path, create_dirs)
    try:
        return os.open(name, flags | FILE_FLAGS, 0o644, dir_fd=dir_fd)
    except FileNotFoundError:
        raise FileNotFoundError(2, "No such file or directory", path) from None
    except OSError:
        _refuse_link(dir_fd, name, path)
        raise
    finally:
        os.close(dir_fd)


def _regular(fd, path):
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError(f"{path!r} is not a regular file")
    return fd


def open_for_write(path, mode, append=False):
    fd = _regular(open_in(path, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else 0), True), path)
    if not append:
        os.ftruncate(fd, 0)
    os.fchmod(fd, mode)
    return open(fd, "ab" if append else "wb")


def write_file(path, data, mode, append):
    with open_for_write(path, mode, append) as f:
        f.write(data)
    return b""


def copy_file(source, path, mode):
    with open_for_write(path, mode) as f:
        shutil.copyfileobj(source, f, 1 << 20)
    return b""


def read_file(out, path, max_bytes):
    fd = _regular(open_in(path, os.O_RDONLY), path)
    with open(fd, "rb") as f:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise ValueError(f"the file is {size} bytes, over the limit of {max_bytes}")
        shutil.copyfileobj(f, out, 1 << 20)


def extract(archive, path):
    """Unpack a tar archive under `path` (checked by the host: relative members, links inside),
    creating each member through the no-follow walk: a member never lands through a link."""
    base = path.strip("/")

    def inside(name):
        return f"{base}/{name}" if base not in ("", ".") else name

    with tarfile.open(fileobj=archive) as tar:
        for member in tar:
            target = inside(member.name)
            if member.isdir():
                os.close(walk(target + "/.", create=True)[0])
            elif member.isfile():
                source = tar.extractfile(member)
                assert source is not None  # a regular file's member has its data
                with open_for_write(target, member.mode & 0o777 or 0o644) as f:
                    shutil.copyfileobj(source, f, 1 << 20)
            elif member.issym() or member.islnk():
                dir_fd, name = walk(target, create=True)
                try:
                    if member.issym():
                        os.symlink(member.linkname, name, dir_fd=dir_fd)
                    else:
                        src_fd, src = walk(inside(member.linkname))
                        try:
                            os.link(src, name, src_dir_fd=src_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
                        finally:
                            os.close(src_fd)
                finally:
                    os.close(dir_fd)
    return b""


def pack(out, path, max_bytes):
    """Write a tar archive of `path` to `out`; links are stored as links, never followed."""
    dir_fd, name = walk(path)
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        os.close(dir_fd)
        raise FileNotFoundError(2, "No such file or directory", path) from None
    arcname = os.path.basename(path.rstrip("/")) or "."
    if arcname == ".":  # the workspace itself
        os.close(dir_fd)
        dir_fd, name = os.open(os.path.dirname(WORKDIR), DIR_FLAGS), os.path.basename(WORKDIR)
    try:
        with tarfile.open(fileobj=out, mode="w|") as tar:
            _add(tar, dir_fd, name, arcname, 0)
    finally:
        os.close(dir_fd)


def _add(tar, dir_fd, name, arcname, depth):
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    info = tarfile.TarInfo(arcname)
    info.mode, info.mtime, info.uid, info.gid = st.st_mode & 0o7777, int(st.st_mtime), st.st_uid, st.st_gid
    if stat.S_ISLNK(st.st_mode):
        info.type, info.linkname = tarfile.SYMTYPE, os.readlink(name, dir_fd=dir_fd)
        tar.addfile(info)
    elif stat.S_ISREG(st.st_mode):
        fd = os.open(name, os.O_RDONLY | FILE_FLAGS, dir_fd=dir_fd)
        with open(fd, "rb") as f:
            info.size = os.fstat(fd).st_size
            tar.addfile(info, f)
    elif stat.S_ISDIR(st.st_mode):
        if depth > MAX_TREE_DEPTH:
            raise ValueError(f"{arcname!r}: directories nested deeper than {MAX_TREE_DEPTH}")
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        sub = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
        try:
            for child in sorted(os.listdir(sub)):
                _add(tar, sub, child, f"{arcname}/{child}", depth + 1)
        finally:
            os.close(sub)
    # sockets, FIFOs and devices are left out
