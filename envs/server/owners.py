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

The caller is set once per request or WebSocket by the guard (`GuardMiddleware`) in a context
variable, which every task the request starts inherits; checking it costs a lookup and a compare.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from agentrl.protocol import CLIENT_KEY_HEADER

CLIENT_HEADER = CLIENT_KEY_HEADER.lower().encode()
MAX_KEY_CHARS = 128


@dataclass(frozen=True)
class Caller:
    """The client key a request carries (None: none), and whether it bears the operator token."""

    key: str | None = None
    operator: bool = False

    def reaches(self, owner: str | None) -> bool:
        """Whether this caller may reach an episode created with client key `owner`."""
        return owner is None or self.operator or owner == self.key

    def lists(self, owner: str | None) -> bool:
        """Whether this caller's episode list shows an episode created with client key `owner`."""
        return self.operator or owner == self.key


ANYONE = Caller()  # what code outside a request (the reaper, shutdown) acts as
CALLER: ContextVar[Caller] = ContextVar("agentrl_caller", default=ANYONE)


def client_key(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The request's client key, cut to `MAX_KEY_CHARS` (a key is an opaque random string)."""
    for name, value in headers:
        if name == CLIENT_HEADER:
            return value.decode("latin-1")[:MAX_KEY_CHARS] or None
    return None
