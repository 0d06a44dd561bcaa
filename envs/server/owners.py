"""Who may reach an episode: the client that created it, and the operator.

Every agentrl client sends a client key, drawn at random per client (`X-Agentrl-Client`), on every
request. An episode made with a key is reachable only with that key or by the operator: a step,
reset, close, status, fork, render or transcript from anyone else is answered as an unknown episode,
so another client holding the one shared token can neither drive nor read it, nor learn that it
exists; `GET /v1/episodes` lists the caller's own episodes only. Episodes made without a key (curl,
OpenEnv's client, the page's own play form) are reachable by every caller with the token, as before.

The operator is a request bearing the operator token (`--operator-token`, `AGENTRL_OPERATOR_TOKEN`):
it reaches and lists every episode, as the page at /ui does when signed in with it. A server with no
token at all (loopback only) authenticates no one and takes every caller for the operator: a key a
caller asserts of itself protects nothing without a token, and whoever can reach such a server can
read the process anyway. Isolation holds wherever a token does.

A key is compared whole: one outside the rule of `agentrl.protocol.CLIENT_KEY` (1 to 128 letters,
digits, `.`, `_`, `:` or `-`) is refused with a 400, never cut or mended, so two keys that differ
anywhere reach different episodes. What the server remembers of an ended episode holds a digest of
its key (`key_digest`), not the key, and tells only a caller who reaches it that it ended.

The caller is set once per request or WebSocket by the guard (`GuardMiddleware`) in a context
variable, which every task the request starts inherits; checking it costs a lookup and a compare.
"""

from __future__ import annotations

import hashlib
from contextvars import ContextVar
from dataclasses import dataclass

from agentrl.protocol import CLIENT_KEY_HEADER, check_client_key

CLIENT_HEADER = CLIENT_KEY_HEADER.lower().encode()


@dataclass(frozen=True)
class Caller:
    """The client key a request carries (None: none), and whether it bears the operator token."""

    key: str | None = None
    operator: bool = False

    def reaches(self, owner: str | None) -> bool:
        """Whether this caller may reach an episode created with client key `owner`."""
        return owner is None or self.operator or owner == self.key

    def reaches_ended(self, owner_digest: str | None) -> bool:
        """Whether this caller may hear how an ended episode made with a key of digest
        `owner_digest` (`key_digest`) ended; anyone else is answered as if it never existed."""
        return owner_digest is None or self.operator or owner_digest == key_digest(self.key)

    def lists(self, owner: str | None) -> bool:
        """Whether this caller's episode list shows an episode created with client key `owner`."""
        return self.operator or owner == self.key


ANYONE = Caller()  # what code outside a request (the reaper, shutdown) acts as
CALLER: ContextVar[Caller] = ContextVar("agentrl_caller", default=ANYONE)


def client_key(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The request's client key (None: it sends none); a ValueError saying why where the key is
    not a valid one (`agentrl.protocol.check_client_key`)."""
    for name, value in headers:
        if name == CLIENT_HEADER:
            return check_client_key(value.decode("latin-1"))
    return None


def key_digest(key: str | None) -> str | None:
    """What stays of a client key where it is kept past its episode (the memory of ended episodes,
    on disk too): a digest that tells one key from another and gives no key away."""
    if key is None:
        return None
    return hashlib.blake2b(key.encode(), digest_size=16, person=b"agentrl-owner").hexdigest()
