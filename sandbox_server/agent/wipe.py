"""The in-sandbox agent's wipe (standard library only, shipped as text with main.py).

A wipe puts a sandbox back in a new one's state: every writable place of the user emptied, every
SysV IPC object of the user removed, and the wiped directories' mode, extended attributes and times
put back as they were at start (`record_fixed`, `fix_tops`), so nothing one caller leaves reaches
the next; `leftovers` says what a wipe could not clear. The host sends this file's text along with
the agent's and the agent imports it as `agentrl_agent_wipe`; kept apart from lib.py, which is
what commands run with, because it is the one part that deletes.
"""

import contextlib
import os
import shutil
import stat
import subprocess

from agentrl_agent_lib import WORKDIR, user_processes  # pyright: ignore[reportMissingImports]  # a module only in the sandbox: agent/__init__.py

WIPED = (WORKDIR, "/tmp", "/dev/shm", "/dev/mqueue")


def sysv_objects():
    """The SysV IPC objects (shared memory, queues, semaphores) that exist: (kind, id) pairs."""
    found = []
    for kind in ("shm", "msg", "sem"):
        with contextlib.suppress(OSError), open(f"/proc/sysvipc/{kind}") as f:
            found += [(kind, int(line.split()[1])) for line in list(f)[1:] if line.strip()]
    return found


FIXED_TIME = 946684800  # 2000-01-01: the times of every wiped directory after a wipe
FIXED = {}  # wiped directory -> (mode, uid, gid, mtime_ns): its state at start, put back by every wipe


def fix_tops():
    """Put the wiped directories this process owns in their fixed state: their mode at start, no
    extended attribute (ACLs included), fixed times. A wipe ends with this (as the user for the
    workspace, as the agent for the rest), so nothing set on them reaches the next caller."""
    for top in WIPED:
        try:
            st = os.stat(top, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if st.st_uid != os.geteuid():
            continue
        for attr in os.listxattr(top, follow_symlinks=False):
            os.removexattr(top, attr, follow_symlinks=False)
        mode = FIXED[top][0] if top in FIXED else stat.S_IMODE(st.st_mode)
        os.chmod(top, mode, follow_symlinks=False)
        with contextlib.suppress(PermissionError):  # a file system that keeps its own times
            os.utime(top, (FIXED_TIME, FIXED_TIME), follow_symlinks=False)
    return b""


def record_fixed():
    for top in WIPED:
        with contextlib.suppress(FileNotFoundError):
            st = os.stat(top, follow_symlinks=False)
            FIXED[top] = (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_mtime_ns)


def changed_tops():
    """The wiped directories not in their fixed state (one that cannot be read counts as changed)."""
    changed = []
    for top, fixed in FIXED.items():
        try:
            st = os.stat(top, follow_symlinks=False)
            now = (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_mtime_ns)
            if now != fixed or os.listxattr(top, follow_symlinks=False) or os.listdir(top):
                changed.append(top)
        except OSError:
            changed.append(top)
    return changed


def leftovers():
    """What of the user is left: processes first, for with none left nothing can change the rest."""
    if user_processes():
        return ["processes"]
    return changed_tops() + (["IPC objects"] if sysv_objects() else [])


def wipe_files():
    """As the user, after every process of the user is gone: empty its writable places and IPC."""
    for top in WIPED:
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(top):
                path = os.path.join(top, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
    flag = {"shm": "-m", "msg": "-q", "sem": "-s"}
    for kind, ident in sysv_objects():
        subprocess.run(["ipcrm", flag[kind], str(ident)], check=True, capture_output=True)
    return b""
