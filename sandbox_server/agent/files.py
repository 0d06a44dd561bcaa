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


def _open_dir(dir_fd, name, shown, made):
    try:
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        if made is None:
            raise FileNotFoundError(2, "No such file or directory", shown) from None
    except OSError:
        _refuse_link(dir_fd, name, shown)
        raise
    try:
        os.mkdir(name, 0o755, dir_fd=dir_fd)
        made.append(shown)
    except FileExistsError:
        pass
    return _open_dir(dir_fd, name, shown, None)


def parts_of(path):
    """The components of a workspace-relative path, without empty or "." ones."""
    return [part for part in path.split("/") if part not in ("", ".")]


def walk(path, made=None):
    """(fd of the directory holding the last component of `path`, that component): `path` is
    relative to the workspace, and no component on the way is a link; with `made` (a list), missing
    directories are made and their paths appended to it."""
    parts = parts_of(path)
    fd = os.open(WORKDIR, DIR_FLAGS)
    try:
        for i, part in enumerate(parts[:-1]):
            parent, fd = fd, _open_dir(fd, part, "/".join(parts[: i + 1]), made)
            os.close(parent)
    except BaseException:
        os.close(fd)
        raise
    return fd, (parts[-1] if parts else ".")


def open_in(path, flags):
    """An fd of the file at `path` in the workspace opened with `flags`, no link followed."""
    dir_fd, name = walk(path)
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


class Changes:
    """Writes that land all together or not at all.

    Each file is written under a temporary name beside its target, and each directory made on the
    way is remembered; `commit` renames the files into place (a rename replaces a file whole, and
    takes no space), `rollback` removes every temporary file and made directory. So a write the disk
    has no room for, or an archive with a bad member, leaves the workspace exactly as it was: an
    old file whole, no new file, no folder. The price: old and new data are on the disk together
    until the rename.
    """

    def __init__(self):
        self.made = []  # directories made, in order
        self.staged = []  # (target path, temporary name beside it), in order
        self.pending = {}  # target path -> its temporary name, for hard links to a staged member

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is not None:
            self.rollback()
            return
        try:
            self.commit()
        except BaseException:
            self.rollback()
            raise

    def _stage(self, path, make, replace):
        """Make a new entry for `path` under a temporary name (`make(dir_fd, temporary name)`);
        `replace`: an existing regular file may be replaced (else an existing entry is refused)."""
        dir_fd, name = walk(path, self.made)
        try:
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISLNK(st.st_mode):
                raise LinkRefused(f"{path!r} is a symbolic link: the files API does not follow links")
            if st is not None and not (replace and stat.S_ISREG(st.st_mode)):
                if replace:
                    raise ValueError(f"{path!r} is not a regular file")
                raise FileExistsError(17, "File exists", path)
            temp = f".agentrl-{os.urandom(8).hex()}.part"
            self.staged.append((path, temp))  # before it exists: a rollback removes what was made
            self.pending["/".join(parts_of(path))] = temp
            make(dir_fd, temp)
        finally:
            os.close(dir_fd)

    def write(self, path, source, mode):
        """A regular file at `path` with the bytes of `source` (bytes or a file object)."""

        def make(dir_fd, temp):
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | FILE_FLAGS, 0o600, dir_fd=dir_fd)
            with open(fd, "wb") as f:
                os.fchmod(fd, mode)
                if isinstance(source, bytes):
                    f.write(source)
                else:
                    shutil.copyfileobj(source, f, 1 << 20)

        self._stage(path, make, replace=True)

    def symlink(self, path, target):
        self._stage(path, lambda dir_fd, temp: os.symlink(target, temp, dir_fd=dir_fd), replace=False)

    def hardlink(self, path, source):
        """A hard link at `path` to the file at `source`: one already there, or one of these changes."""
        key = "/".join(parts_of(source))
        if key in self.pending:  # staged: linked under its temporary name, renamed with it
            source = "/".join([*parts_of(source)[:-1], self.pending[key]])
        src_fd, src = walk(source)
        try:
            self._stage(
                path,
                lambda dir_fd, temp: os.link(
                    src, temp, src_dir_fd=src_fd, dst_dir_fd=dir_fd, follow_symlinks=False
                ),
                replace=False,
            )
        finally:
            os.close(src_fd)

    def directory(self, path):
        dir_fd, name = walk(path, self.made)
        try:
            if name != ".":
                os.close(_open_dir(dir_fd, name, path, self.made))
        finally:
            os.close(dir_fd)

    def commit(self):
        """Rename every staged file into place, in order; what is left staged if one fails stays
        in `staged` for `rollback`."""
        for done, (path, temp) in enumerate(self.staged):
            try:
                dir_fd, name = walk(path)
                try:
                    os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                finally:
                    os.close(dir_fd)
            except BaseException:
                self.staged = self.staged[done:]
                raise
        self.staged = []

    def rollback(self):
        for path, temp in self.staged:
            with contextlib.suppress(OSError):
                dir_fd, _ = walk(path)
                try:
                    os.unlink(temp, dir_fd=dir_fd)
                finally:
                    os.close(dir_fd)
        for path in reversed(self.made):  # deepest first; one the user has filled meanwhile stays
            with contextlib.suppress(OSError):
                dir_fd, name = walk(path)
                try:
                    os.rmdir(name, dir_fd=dir_fd)
                finally:
                    os.close(dir_fd)
        self.staged, self.made = [], []


def write_file(path, source, mode):
    """Write `source` (bytes or a file object) to `path` whole or not at all (`Changes`)."""
    with Changes() as changes:
        changes.write(path, source, mode)
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
    creating each member through the no-follow walk, so a member never lands through a link; all of
    it or, on any failure, nothing (`Changes`)."""
    base = path.strip("/")

    def inside(name):
        return f"{base}/{name}" if base not in ("", ".") else name

    with tarfile.open(fileobj=archive) as tar, Changes() as changes:
        for member in tar:
            target = inside(member.name)
            if member.isdir():
                changes.directory(target)
            elif member.isfile():
                source = tar.extractfile(member)
                assert source is not None  # a regular file's member has its data
                changes.write(target, source, member.mode & 0o777 or 0o644)
            elif member.issym():
                changes.symlink(target, member.linkname)
            elif member.islnk():
                changes.hardlink(target, inside(member.linkname))
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
