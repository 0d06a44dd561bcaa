"""The process's allocator: a freed tensor's memory goes back to the system, not to a free list.

glibc's malloc serves a request below its mmap threshold from an arena, and raises that threshold
(up to 32 MiB) each time a mapped chunk is freed; so once the first large tensor is freed, a
row's keys and values (about 2 MiB a layer for 2,700 SmolLM2 tokens) and a pass's activations come
from arenas. Freed, they stay in the process as free chunks that only requests fitting them reuse,
and the rollouts' threads and the update's each fill arenas of their own: the process's resident
memory grows past what it holds. A fixed threshold maps each allocation of `threshold` bytes and
more by itself and unmaps it when it is freed.
"""

from __future__ import annotations

import ctypes

M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)


def map_large_allocations(threshold: int = 1 << 20) -> bool:
    """Fix glibc's mmap threshold at `threshold` bytes for this process. False where the C
    library is not glibc (macOS, musl): nothing is changed there."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, threshold))
