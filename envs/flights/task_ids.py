"""Task ids that name a Flights-v0 task without telling anything about it.

A task is a pure function of public fields (split, family, level, seed index, days, whether fares
move), and the task builder is public, so a plain hash of those fields could be inverted by
enumerating them: the id would give away the task, and with it the outcome and the answer. The
id is therefore an HMAC-SHA256 of those fields under a secret key:

- by default a key derived from the cluster's secret (`agentrl.core.cluster_secret`): every
  process of one cluster, and so every holder behind one address, names the same task with the
  same id; a process outside a cluster draws its own secret, and another process names it anew;
- set by the operator for ids stable across processes and restarts (several servers behind one
  trainer, ledgers kept between runs): the environment variable `AGENTRL_TASK_ID_KEY`, or the
  env kwarg `task_id_key` (an operator kwarg: a server takes it from its own configuration only,
  never from a client, who could otherwise pick a key they know and invert the ids).

Whoever knows the key can recompute ids from public fields; keep it as secret as the answer key.
"""

from __future__ import annotations

import functools
import hashlib
import hmac

from agentrl.core.cluster_secret import configured_secret, key_for

KEY_VARIABLE = "AGENTRL_TASK_ID_KEY"
ID_LENGTH = 20  # hex digits: 80 bits
PURPOSE = "flights-v0 task ids"  # what the key is derived for from the cluster's secret

@functools.cache
def process_key() -> bytes:
    """The key of this process: `AGENTRL_TASK_ID_KEY` if set (read once), else the cluster's (`key_for`)."""
    return configured_secret(KEY_VARIABLE) or key_for(PURPOSE)


def key_bytes(key: str | bytes | None) -> bytes:
    """An operator's key as bytes (None: the process key)."""
    if key is None:
        return process_key()
    if isinstance(key, str):
        key = key.encode()
    if not key:
        raise ValueError("task_id_key must not be empty")
    return key


def keyed_id(key: bytes, *fields: object) -> str:
    """The keyed id of the task named by `fields` (the public fields that determine it)."""
    message = "|".join(["flights-v0", *(str(f) for f in fields)]).encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()[:ID_LENGTH]
