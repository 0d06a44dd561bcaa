"""Settings of one agentrl server; a plain dataclass so that tests and the CLI build it the same way."""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass, field
from typing import Any

from agentrl.serving.runner import is_loopback

TOKEN_ENV_VAR = "AGENTRL_TOKEN"
OPERATOR_TOKEN_ENV_VAR = "AGENTRL_OPERATOR_TOKEN"
HOLDER_ENV_VAR = "AGENTRL_HOLDER"


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    # env ids served; None serves every id in agentrl.registration.ENV_ENTRY_POINTS
    env_ids: tuple[str, ...] | None = None
    # env used by the OpenEnv WebSocket at /ws when a reset names none
    default_env_id: str | None = None
    token: str | None = None
    # a second token that reaches and lists every client's episodes (`agentrl.server.owners`)
    operator_token: str | None = None
    max_episodes: int = 1024
    idle_ttl_s: float = 600.0
    max_age_s: float = 3600.0
    reap_interval_s: float = 5.0
    max_action_chars: int = 65_536
    # request bodies above this are refused before they are read whole (batches carry many actions)
    max_body_bytes: int = 16 * 1024 * 1024
    # threads running env code (env steps block; the event loop never does)
    workers: int = 64
    # results kept per episode for `request_id` retries
    idempotency_window: int = 32
    # constructor arguments per env id set by whoever runs the server; clients' env_kwargs go on
    # top, except the env's `operator_kwargs`, which only these may set
    env_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    extra: dict[str, str] = field(default_factory=dict)
    # the name this process puts at the head of every episode id it creates, so that a router in
    # front of several processes (a Kubernetes Service per pod, a Ray Serve deployment) can send a
    # request to the process holding its episode; default: host name and port
    holder: str | None = None
    # the page at /ui (play, watch, read episodes; same auth as the API)
    ui: bool = True
    # where this server keeps what must outlive its process: the ended episodes it remembers
    # (`agentrl.server.ended`), so that a restarted holder still answers them as ended; None: in memory
    state_dir: str | None = None
    # ended episodes remembered (about 150 bytes each), each until it is past `max_age_s`
    ended_memory: int = 65_536

    def resolved_token(self) -> str | None:
        return self.token or os.environ.get(TOKEN_ENV_VAR) or None

    def resolved_operator_token(self) -> str | None:
        return self.operator_token or os.environ.get(OPERATOR_TOKEN_ENV_VAR) or None

    def resolved_holder(self) -> str:
        """The holder name: letters, digits, `-` and `_` only (it heads ids used in URL paths)."""
        given = self.holder or os.environ.get(HOLDER_ENV_VAR) or f"{socket.gethostname()}-{self.port}"
        return re.sub(r"[^A-Za-z0-9_-]+", "-", given).strip("-") or "agentrl"

    def check(self) -> None:
        """Refuse settings that would expose envs without auth or that cannot work."""
        if not is_loopback(self.host) and not self.resolved_token():
            raise ValueError(
                f"binding to non-loopback host {self.host!r} requires a token "
                f"(--token or the {TOKEN_ENV_VAR} environment variable)"
            )
        if self.max_episodes < 1 or self.workers < 1:
            raise ValueError("max_episodes and workers must be at least 1")
        if self.idle_ttl_s <= 0 or self.max_age_s <= 0 or self.reap_interval_s <= 0:
            raise ValueError("idle_ttl_s, max_age_s and reap_interval_s must be positive")
        if self.ended_memory < 0:
            raise ValueError("ended_memory must be at least 0")
