"""`info["state_hash"]`: a stable name for the environment state the next step depends on.

Step-level credit methods that need no extra rollouts (GiGPO's anchor states) group the steps of a
task's rollouts that start from the same state; an env names that state by a hash of what its next
step depends on and nothing else: no wall clock, no random ids, no turn count (a loop that comes back
to a state is that state again), and never the task's answer. Two episodes of one task that reach the
same state by different routes (two searches in either order) get the same hash.

Each env says what its state is (`TextEnv._state`, `ToolEnv._world_state`); this module only turns
that into a hash, one way for every env.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

DIGEST_BYTES = 16


def _plain(value: Any) -> Any:
    """What json cannot write, as something it can, order-free where the value is a set."""
    if isinstance(value, (set, frozenset)):
        return sorted(canonical(v) for v in value)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"state_hash cannot hash a {type(value).__name__}; give the env state as plain data")


# one encoder for every step: `json.dumps` with options builds a new one per call
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_plain)


def canonical(state: Any) -> str:
    """One text per state: keys sorted, sets sorted, no whitespace."""
    return _ENCODER.encode(state)


def text_digest(text: str) -> str:
    """blake2b (16 bytes, hex) of a text's UTF-8 bytes: a long text (the task, a tool result) is hashed
    once, and a state then carries its digest, not the text (json would re-escape it at every step)."""
    return hashlib.blake2b(text.encode(), digest_size=DIGEST_BYTES).hexdigest()


def state_hash(state: Any) -> str:
    """blake2b (16 bytes, hex) of the state's canonical JSON."""
    return hashlib.blake2b(canonical(state).encode(), digest_size=DIGEST_BYTES).hexdigest()
