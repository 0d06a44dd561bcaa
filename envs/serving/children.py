"""Child processes of a server that runs holders: started to die with their parent, and stopped.

A holder is a child process on a loopback port of this machine. It must not outlive the process
that supervises it, however that one ends (a SIGKILL included, where no cleanup runs): each child
asks the kernel for SIGKILL when its parent goes (`PR_SET_PDEATHSIG`, Linux), and a parent that
stops normally terminates its children first (`stop_process`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Run in the child before exec: the kernel sends it SIGKILL when the parent dies (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn_child(command: list[str], env: dict[str, str]) -> subprocess.Popen:
    """`command` as a child that dies with this process, its stdout discarded (its log goes to stderr)."""
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, preexec_fn=die_with_parent)


def stop_process(proc: subprocess.Popen, timeout_s: float) -> None:
    """SIGTERM (a server closes what it holds and exits), then SIGKILL after `timeout_s`; blocks."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on `host` now (a child told to listen on it binds it a moment later)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def cpu_count() -> int:
    """The cores this process may run on (`--processes auto`)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
