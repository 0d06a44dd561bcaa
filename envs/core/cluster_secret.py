"""The secret every process of one cluster shares, from which an env derives the keys it names things with.

An env that names things with a keyed hash (Flights-v0's task ids: a name that must not give away
what it names) needs the same key in every process that serves it behind one address, or the same
thing gets another name on each holder, and a trainer's ledger of names misses an overlap. A
cluster's parent (`agentrl serve --processes`, `--ray`) therefore hands every holder, a restarted
one too, one secret in the environment variable `AGENTRL_CLUSTER_SECRET`: the operator's if set
(names then stay the same across runs too), else one it draws. A process that finds none draws its
own, so a lone server names things alike within itself only.

Each env derives its own key (`key_for(purpose)`, an HMAC of the purpose under the secret), so that
one env's key tells nothing of another's. Whoever knows the secret can recompute every derived key:
keep it as secret as the answers the names stand for.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading

VARIABLE = "AGENTRL_CLUSTER_SECRET"

_lock = threading.Lock()
_secret: bytes | None = None


def configured_secret(variable: str) -> bytes | None:
    """The secret an operator set in the environment variable `variable`, None where it is unset;
    set but empty is refused (an empty key would name things as if there were none)."""
    value = os.environ.get(variable)
    if value is not None and not value:
        raise ValueError(f"{variable} is set but empty; unset it or give a secret")
    return value.encode() if value else None


def cluster_secret() -> bytes:
    """This process's cluster secret: `AGENTRL_CLUSTER_SECRET` if set (read once), else 32 random
    bytes drawn once (under a lock: two threads must not draw two secrets)."""
    global _secret
    with _lock:
        if _secret is None:
            _secret = configured_secret(VARIABLE) or secrets.token_bytes(32)
        return _secret


def key_for(purpose: str) -> bytes:
    """The key of `purpose` (an env's own name for what it keys), the same in every process of a cluster."""
    return hmac.new(cluster_secret(), purpose.encode(), hashlib.sha256).digest()

