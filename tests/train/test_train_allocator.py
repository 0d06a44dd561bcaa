"""Freed tensors go back to the system once `map_large_allocations` fixed glibc's mmap threshold.

A step frees thousands of row caches and activations of a few MiB while the rollouts' and the
update's threads keep other tensors alive around them; in an arena, a freed chunk below a live one
stays in the process. Each case runs in a fresh interpreter: its allocator is its own.
"""

from __future__ import annotations

import platform
import subprocess
import sys

from support import unavailable

RETAINED = """
import os, sys, torch
from agentrl.agent_train.allocator import map_large_allocations
if sys.argv[1] == "mapped":
    assert map_large_allocations()
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
big = torch.ones((16 << 20) // 4)
del big  # a freed mapped chunk of up to 32 MiB: glibc raises its threshold to its size
before = rss()
rows = [torch.ones((2 << 20) // 4) for _ in range(150)]  # a step's row caches: 300 MiB
del rows[:-1]  # all but the last allocated: what is freed lies below a live tensor
print((rss() - before) >> 20)
"""


def retained_mib(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", RETAINED, mode], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


def test_freed_row_caches_leave_the_process_once_large_allocations_are_mapped():
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        unavailable("glibc's malloc (Linux) is what map_large_allocations tunes")
    assert retained_mib("default") >= 250  # the freed 298 MiB stay in the arena
    assert retained_mib("mapped") <= 16
