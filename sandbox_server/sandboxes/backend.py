"""What every backend shares: the table of live sandboxes, TTL reaping and the `create` signature."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agentrl.sandbox_server.sandboxes.channel import AgentLink
from agentrl.sandbox_server.sandboxes.sandbox import AgentSandbox
from agentrl.sandbox_server.wire.errors import AtCapacity, InvalidRequest, SandboxNotFound
from agentrl.sandbox_server.wire.models import DEFAULT_IMAGE, SandboxInfo, SandboxSpec, SpecArgs, spec_changes

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack: Python 3.11+

log = logging.getLogger("agentrl.sandbox")


class Backend:
    """Base of `DockerBackend` and `LocalBackend`: subclasses say how to start and stop one agent."""

    kind = "base"
    id_prefix = ""  # heads every sandbox id: a holder's name and "." when several servers share one address

    def __init__(
        self, *, max_sandboxes: int = 256, reap_interval_s: float = 2.0, defaults: SandboxSpec | None = None
    ):
        self.defaults = defaults or SandboxSpec()
        self.max_sandboxes = max_sandboxes
        self._sandboxes: dict[str, tuple[AgentSandbox, Any]] = {}
        self._creating = 0  # creates under way: counted against max_sandboxes, so the limit is exact
        self._gone: OrderedDict[str, str] = OrderedDict()  # recently closed id -> why, for clear errors
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reap_interval_s = reap_interval_s
        self._reaper = threading.Thread(
            target=self._reap_loop, name=f"{self.kind}-sandbox-reaper", daemon=True
        )
        self._reaper.start()

    # -- subclass hooks ----------------------------------------------------------------------------
    def _acquire(self, spec: SandboxSpec) -> tuple[AgentLink, Any]:
        raise NotImplementedError

    def _release(self, handle: Any) -> None:
        raise NotImplementedError

    def _periodic(self) -> None:
        """Extra housekeeping on each reaper tick."""

    def warm_count(self) -> int:
        """Containers started ahead and ready to hand out (none for a backend without a pool)."""
        return 0

    def _links(self) -> list[AgentLink]:
        """Every live agent link of this backend (sandboxes and any pre-started ones)."""
        with self._lock:
            return [sandbox.link for sandbox, _ in self._sandboxes.values()]

    # -- public API --------------------------------------------------------------------------------
    def create(
        self,
        image: str | None = None,
        *,
        files: Mapping[str, bytes | str] | None = None,
        spec: SandboxSpec | None = None,
        owner: str | None = None,
        **changes: Unpack[SpecArgs],
    ) -> AgentSandbox:
        """A new sandbox. Arguments left out (or None) come from `spec`, then from the backend's
        defaults; `owner` (a tenant of the HTTP server) is kept with it."""
        base = (spec or self.defaults).model_dump()
        try:
            spec = SandboxSpec(**{**base, **spec_changes(image, changes)})
        except ValidationError as exc:
            raise InvalidRequest(str(exc)) from None
        with self._lock:
            if len(self._sandboxes) + self._creating >= self.max_sandboxes:
                raise AtCapacity(f"{self.max_sandboxes} sandboxes are open; close some first")
            self._creating += 1
        try:
            link, handle = self._acquire(spec)
        except BaseException:
            with self._lock:
                self._creating -= 1
            raise
        now = time.time()
        sandbox_id = self.id_prefix + uuid.uuid4().hex[:16]
        info = SandboxInfo(
            sandbox_id=sandbox_id,
            image=spec.image or DEFAULT_IMAGE,
            cpus=spec.cpus,
            memory_mb=spec.memory_mb,
            pids=spec.pids,
            disk_mb=spec.disk_mb,
            created_at=now,
            expires_at=now + spec.ttl_s,
            last_used_at=now,
            idle_ttl_s=spec.idle_ttl_s,
        )
        sandbox = AgentSandbox(sandbox_id, link, info, self.destroy, owner=owner)
        with self._lock:
            self._creating -= 1
            self._sandboxes[sandbox_id] = (sandbox, handle)
        try:
            if spec.env:
                sandbox.configure(spec.env)
            for path, data in (files or {}).items():
                sandbox.write_file(path, data)
        except BaseException:
            self.destroy(sandbox_id)
            raise
        return sandbox

    def get(self, sandbox_id: str) -> AgentSandbox:
        with self._lock:
            entry = self._sandboxes.get(sandbox_id)
            if entry is None:
                why = self._gone.get(sandbox_id, "no such sandbox")
                raise SandboxNotFound(f"sandbox {sandbox_id}: {why}")
            return entry[0]

    def list(self, owner: str | None = None) -> list[SandboxInfo]:
        """The open sandboxes; with `owner`, only that owner's."""
        with self._lock:
            return [s.info for s, _ in self._sandboxes.values() if owner is None or s.owner == owner]

    def sandboxes(self) -> list[AgentSandbox]:
        with self._lock:
            return [sandbox for sandbox, _ in self._sandboxes.values()]

    def destroy(self, sandbox_id: str, reason: str = "deleted") -> None:
        with self._lock:
            entry = self._sandboxes.pop(sandbox_id, None)
            if entry is None:
                return
            self._gone[sandbox_id] = reason
            while len(self._gone) > 4096:
                self._gone.popitem(last=False)
        sandbox, handle = entry
        sandbox.mark_closed(reason)
        self._release(handle)

    def reap_expired(self) -> int:
        """Destroy sandboxes past their hard TTL, or idle past their idle TTL (a running call is not idle)."""
        now = time.time()
        with self._lock:
            entries = list(self._sandboxes.values())
        reaped = 0
        for sandbox, _ in entries:
            info = sandbox.info
            if now >= info.expires_at:
                self.destroy(
                    info.sandbox_id, f"expired (hard TTL of {info.expires_at - info.created_at:g} s)"
                )
            elif now - info.last_used_at >= info.idle_ttl_s and not sandbox.link.lock.locked():
                self.destroy(info.sandbox_id, f"expired (idle for more than {info.idle_ttl_s:g} s)")
            else:
                continue
            reaped += 1
        return reaped

    def close(self) -> None:
        """Destroy every sandbox of this backend and stop its threads."""
        self._stop.set()
        with self._lock:
            ids = list(self._sandboxes)
        for sandbox_id in ids:
            self.destroy(sandbox_id, "the backend was closed")

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _reap_loop(self) -> None:
        while not self._stop.wait(self._reap_interval_s):
            try:
                self.reap_expired()
                for link in self._links():
                    link.beat()
                self._periodic()
            except Exception:  # housekeeping must outlive one failure
                log.exception("sandbox housekeeping failed")
