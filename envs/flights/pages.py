"""One copy of a world's database pages for all its live episodes: copy-on-write, page by page.

Every episode of a world starts from the same database image (about 380 KB for a 1-day world), and a
copy of it per episode (`Connection.deserialize` always copies) was most of a live episode's memory.
Here the image is written once per world into an anonymous in-memory file (`memfd`); each episode's
database is a private mapping of that file (`MAP_PRIVATE`): it reads the world's pages where they
are, and the kernel copies a 4 KiB page for the episode only when the episode first writes to it.
SQLite's in-memory VFS (memdb) takes the mapping as the database itself when it is handed over by
`sqlite3_deserialize` without the flags that make it copy, own or grow the buffer, which Python's
`deserialize` cannot ask for: the call goes through ctypes, to the SQLite library that the `sqlite3`
module itself links, with the `sqlite3 *` handle the Connection object holds. With `mmap_size` set,
SQLite also reads pages in place (memdb's xFetch) instead of copying each one it reads into its page
cache.

The mapping is `SPARE` bytes longer than the image (an untouched tail costs nothing: the file has a
hole there, and a page of it takes memory once some episode of the world writes there), room for the
episode's own rows; an episode that fills half of it is moved to a private copy of its database
(`EpisodeConnection.keep_room`), which grows as before. Where any part is missing (no memfd, another
Python, a SQLite without the symbols or whose handle does not answer as the module's does), episodes
copy the image, as before: the same database, not shared (`SHARING` says which).
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
import sqlite3
import sys
from typing import Any

log = logging.getLogger(__name__)

SPARE = 8 << 20  # bytes of the mapping past the image: virtual until the episode writes there
MMAP_SIZE = 1 << 30  # past any world's size: every page is read in place
# `sqlite3_deserialize` flags 0: memdb neither copies nor frees nor grows the buffer it is given
_BORROW = 0
_FCNTL_FILE_POINTER = 7  # SQLITE_FCNTL_FILE_POINTER: the database's `sqlite3_file *`
_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform == "linux" else 0)
_MAP_FAILED = ctypes.c_void_p(-1).value



class _IoMethods(ctypes.Structure):
    """The head of `sqlite3_io_methods` (sqlite3.h), up to `xFileSize`."""

    _fields_ = [("iVersion", ctypes.c_int)] + [(name, ctypes.c_void_p) for name in
                                               ("xClose", "xRead", "xWrite", "xTruncate", "xSync")] + [
        ("xFileSize", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)))]


class _File(ctypes.Structure):
    """`sqlite3_file`: its methods come first."""

    _fields_ = [("pMethods", ctypes.POINTER(_IoMethods))]


def _unbound(why: str) -> None:
    """Sharing off on a platform that should have it: said once, at import, since every episode
    then copies its world's database (more than twice the memory per live episode)."""
    log.warning("Flights-v0 episodes copy their world's database instead of sharing its pages: %s", why)


def _bind_sqlite() -> Any:
    """The SQLite library of the `sqlite3` module, with the calls used here typed (and the C
    library's `mmap` and `munmap` beside them); None if they cannot be reached or if a connection's
    handle, read from the Connection object, does not answer as that connection does."""
    if sys.implementation.name != "cpython" or not hasattr(os, "memfd_create"):
        return None
    try:
        import _sqlite3

        lib: Any = ctypes.CDLL(_sqlite3.__file__)  # gains the C library's mmap and munmap below
        lib.sqlite3_deserialize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p,
                                            ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
        lib.sqlite3_total_changes.argtypes = [ctypes.c_void_p]
        lib.sqlite3_file_control.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]
        lib.sqlite3_libversion_number.restype = ctypes.c_int
    except (ImportError, OSError, AttributeError) as exc:
        return _unbound(f"SQLite's library could not be bound ({type(exc).__name__}: {exc})")
    if lib.sqlite3_libversion_number() != sqlite3.sqlite_version_info[0] * 1_000_000 + \
            sqlite3.sqlite_version_info[1] * 1000 + sqlite3.sqlite_version_info[2]:
        return _unbound("the SQLite library found is another copy than the sqlite3 module's")
    try:  # the C library's mmap: Python's mmap object keeps a descriptor per mapping, one per episode
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    except (OSError, AttributeError) as exc:
        return _unbound(f"the C library's mmap could not be bound ({type(exc).__name__}: {exc})")
    lib.mmap, lib.munmap = libc.mmap, libc.munmap
    probe = sqlite3.connect(":memory:")
    probe.execute("CREATE TABLE probe (x)")
    probe.executemany("INSERT INTO probe VALUES (?)", [(i,) for i in range(37)])
    matches = lib.sqlite3_total_changes(_handle(probe)) == probe.total_changes == 37
    probe.close()
    return lib if matches else _unbound("a connection's handle read from its object does not answer as it")


def _handle(conn: sqlite3.Connection) -> int:
    """The connection's `sqlite3 *`: CPython's Connection object holds it right after its header."""
    handle = ctypes.c_void_p.from_address(id(conn) + object.__basicsize__).value
    if not handle:
        raise sqlite3.ProgrammingError("the connection is closed")
    return handle


_SQLITE = _bind_sqlite()
SHARING = _SQLITE is not None


class WorldPages:
    """A world's database image, held once: in a memfd that episodes map (`SHARING`), else as bytes."""

    def __init__(self, image: bytes) -> None:
        self.size = len(image)
        self._fd: int | None = None
        self._image: bytes | None = image
        if SHARING:
            self._fd = os.memfd_create("agentrl-flights-world", os.MFD_CLOEXEC)
            view = memoryview(image)
            while view:
                view = view[os.write(self._fd, view):]
            os.ftruncate(self._fd, self.size + SPARE)  # a hole: no memory until an episode writes
            self._image = None

    def image(self) -> bytes:
        """The image as bytes (a copy when shared): what `Connection.deserialize` takes."""
        if self._image is not None:
            return self._image
        assert self._fd is not None
        return os.pread(self._fd, self.size, 0)

    def load_into(self, conn: sqlite3.Connection) -> None:
        """Make `conn`'s main database the world's: mapped if `conn` can (`EpisodeConnection`),
        else a copy."""
        if isinstance(conn, EpisodeConnection) and self._fd is not None:
            conn.map_pages(self._fd, self.size)
        else:
            conn.deserialize(self.image())

    def __del__(self) -> None:
        # the mappings episodes hold stay valid after the file's last descriptor is closed
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class EpisodeConnection(sqlite3.Connection):
    """An episode's connection whose database may be a private mapping of a world's pages.

    It unmaps a mapping once SQLite no longer uses it: after a mapping or a `deserialize` replaced
    it, and after `close` (also when collected unclosed), with any open transaction rolled back
    first, so that SQLite never writes to a mapping that is gone.
    """

    _mapping: tuple[int, int] | None = None  # (address, length)

    def map_pages(self, fd: int, size: int) -> None:
        """The main database becomes a private (copy-on-write) mapping of `fd`'s first `size` bytes,
        with `SPARE` bytes of room to grow."""
        length = size + SPARE
        address = _SQLITE.mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | _NORESERVE,
                               fd, 0)
        if address in (None, _MAP_FAILED):
            errno = ctypes.get_errno()
            raise OSError(errno, f"mapping a world's pages failed: {os.strerror(errno)}")
        if self.in_transaction:
            self.rollback()
        rc = _SQLITE.sqlite3_deserialize(_handle(self), b"main", address, size, length, _BORROW)
        if rc != 0:
            _SQLITE.munmap(address, length)
            raise sqlite3.OperationalError(f"sqlite3_deserialize failed with code {rc}")
        self._release()
        self._mapping = (address, length)
        # a new database has SQLite's defaults again: pages copied into the page cache as they are read
        self.execute(f"PRAGMA mmap_size = {MMAP_SIZE}")

    @property
    def mapped(self) -> bool:
        """Whether the main database is a mapping of a world's pages (not a private copy)."""
        return self._mapping is not None

    def keep_room(self) -> None:
        """Move a mapped database that has filled half its spare room to a private, growable copy
        (only an unusually long episode gets there); memdb cannot grow a mapping."""
        if self._mapping is not None and self.size() > self._mapping[1] - SPARE // 2:
            self.deserialize(self.serialize())

    def size(self) -> int:
        """The main database's size in bytes, from its file (memdb's), without a statement: one
        prepared after a `deserialize` would have SQLite parse the schema again (~0.4 ms)."""
        file = ctypes.c_void_p()
        rc = _SQLITE.sqlite3_file_control(_handle(self), b"main", _FCNTL_FILE_POINTER, ctypes.byref(file))
        size = ctypes.c_int64()
        if rc != 0 or not file.value or \
                _File.from_address(file.value).pMethods.contents.xFileSize(file, ctypes.byref(size)) != 0:
            raise sqlite3.OperationalError("the episode database's size cannot be read")
        return size.value

    def deserialize(self, data: Any, /, *, name: str = "main") -> None:  # type: ignore[override]
        super().deserialize(data, name=name)
        if name == "main" and self._mapping is not None:
            self._release()

    def close(self) -> None:
        if self._mapping is not None and self.in_transaction:
            self.rollback()
        super().close()
        self._release()

    def __del__(self) -> None:
        if self._mapping is not None:  # else the base class closes it as it always does
            self.close()

    def _release(self) -> None:
        mapping, self._mapping = self._mapping, None
        if mapping is not None:
            _SQLITE.munmap(*mapping)
