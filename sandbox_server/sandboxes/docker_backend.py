"""Sandboxes as locked-down Docker containers, driven through the docker SDK.

Each container runs the agent as its only process (under Docker's init), attached once: a create
from the warm pool is a hand-over of an already started, already attached container. Containers are
labelled with their owner (process id, start time, host), so any backend can remove those whose
owner died; and they end by themselves when their owner's attach connection closes, because their
stdin is attached once and the agent exits on end of input (even while a command runs), or when the
owner has not sent its heartbeat for `watchdog_s`.

The agent runs as root with only the capabilities it needs to run commands as the unprivileged user
(SETUID, SETGID, KILL; SETPCAP to empty the bounding set once); Docker's event stream marks a
sandbox dead as soon as its container dies or is paused.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentrl.sandbox_server.agent import PROGRAM as AGENT_PROGRAM
from agentrl.sandbox_server.sandboxes.backend import Backend, log
from agentrl.sandbox_server.sandboxes.channel import AgentLink, AttachChannel
from agentrl.sandbox_server.wire.errors import DockerUnavailable, InvalidRequest, SandboxError
from agentrl.sandbox_server.wire.models import DEFAULT_IMAGE, WORKDIR, SandboxSpec

LABEL = "org.agentrl.sandbox"
AGENT_USER = "0:0"  # commands run as uid 1000; the agent stays out of their reach
AGENT_CAPS = ["SETUID", "SETGID", "KILL", "SETPCAP"]
STATE_DIR = "/run/agentrl"  # the agent's own files (scripts, stdin): root's, read-only to commands
DEAD_EVENTS = {"die": "its container died", "pause": "its container was paused"}
MAX_POOL_KEYS = 8  # images kept warm at once
CONTAINER_MAX_AGE_S = 8 * 86400  # backstop: any backend removes containers older than this
ORPHAN_REMOVAL_WAIT_S = 30.0  # how long a sweep waits for a removal another sweep began


def _process_start(pid: int) -> str:
    """The start time of `pid` in clock ticks since boot ('' if unknown): tells pid reuse apart."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""


def _owner_alive(labels: dict[str, str]) -> bool:
    if labels.get(f"{LABEL}.host") != socket.gethostname():
        return True  # another machine's owner: only the age backstop applies
    try:
        pid = int(labels.get(f"{LABEL}.pid", ""))
    except ValueError:
        return False
    return _process_start(pid) == labels.get(f"{LABEL}.start") != ""


class DockerBackend(Backend):
    """In-process sandboxes on the local Docker engine; no server needed."""

    kind = "docker"

    def __init__(
        self,
        image: str = DEFAULT_IMAGE,
        *,
        pool_size: int = 2,
        max_sandboxes: int = 256,
        max_concurrent_creates: int = 4,
        reap_interval_s: float = 2.0,
        orphan_interval_s: float = 30.0,
        defaults: SandboxSpec | None = None,
        tmp_mb: int = 256,
        watchdog_s: float = 60.0,
    ):
        try:
            import docker.errors

            import docker
        except ImportError as exc:
            raise DockerUnavailable("the docker SDK is missing: pip install 'agentrl[sandbox]'") from exc
        try:
            self.docker = docker.from_env(max_pool_size=256, timeout=120)
            self.docker.ping()
        except Exception as exc:
            raise DockerUnavailable(f"cannot reach the Docker engine ({exc})") from exc
        self._errors = docker.errors
        self.image = image
        self._require_image(image)
        self.tmp_mb = tmp_mb
        self.watchdog_s = watchdog_s
        self.pool_size = pool_size
        self.owner = uuid.uuid4().hex[:12]
        self._labels = {
            LABEL: "1",
            f"{LABEL}.owner": self.owner,
            f"{LABEL}.host": socket.gethostname(),
            f"{LABEL}.pid": str(os.getpid()),
            f"{LABEL}.start": _process_start(os.getpid()),
        }
        self._create_slots = threading.BoundedSemaphore(max_concurrent_creates)
        self._pool: dict[tuple, deque[tuple[AgentLink, str]]] = {}
        self._pool_wanted = threading.Event()
        self._remover = ThreadPoolExecutor(4, thread_name_prefix="sandbox-remove")
        self._orphan_interval_s = orphan_interval_s
        self._last_orphan_sweep = time.monotonic()
        self.reap_orphans()
        self._events = self.docker.api.events(
            decode=True, filters={"type": "container", "label": f"{LABEL}.owner={self.owner}"}
        )
        super().__init__(max_sandboxes=max_sandboxes, reap_interval_s=reap_interval_s, defaults=defaults)
        threading.Thread(target=self._watch_events, name="sandbox-events", daemon=True).start()
        if pool_size > 0:
            self._pool[self._key(self.defaults)] = deque()
            self._filler = threading.Thread(target=self._fill_loop, name="sandbox-pool", daemon=True)
            self._filler.start()

    def _require_image(self, image: str) -> None:
        try:
            self.docker.images.get(image)
        except self._errors.ImageNotFound:
            if image == DEFAULT_IMAGE:
                raise DockerUnavailable(
                    f"the sandbox image {image} is missing; build it: bash docker/engine.sh"
                ) from None
            raise InvalidRequest(f"image {image!r} is not on this Docker engine") from None

    # -- containers ------------------------------------------------------------------------------
    def _key(self, spec: SandboxSpec) -> tuple:
        return (spec.image or self.image, spec.cpus, spec.memory_mb, spec.pids, spec.disk_mb)

    def _start(self, key: tuple) -> tuple[AgentLink, str]:
        image, cpus, memory_mb, pids, disk_mb = key
        api = self.docker.api
        host_config = api.create_host_config(
            network_mode="none",
            read_only=True,
            privileged=False,
            cap_drop=["ALL"],
            cap_add=AGENT_CAPS,
            security_opt=["no-new-privileges"],
            init=True,
            auto_remove=True,
            ipc_mode="private",
            pids_limit=pids,
            mem_limit=f"{memory_mb}m",
            memswap_limit=f"{memory_mb}m",
            nano_cpus=int(cpus * 1e9),
            tmpfs={
                WORKDIR: f"size={disk_mb}m,uid=1000,gid=1000,mode=0755,exec",
                "/tmp": f"size={self.tmp_mb}m,mode=1777,exec",
                STATE_DIR: f"size={self.tmp_mb}m,mode=0711,noexec",
            },
        )
        with self._create_slots:
            try:
                container = api.create_container(
                    # stdin_open also sets StdinOnce: stdin closes when our attach connection does
                    image,
                    entrypoint=["python3", "-I", "-S", "-c", AGENT_PROGRAM],
                    command=[],
                    user=AGENT_USER,
                    working_dir=WORKDIR,
                    stdin_open=True,
                    tty=False,
                    hostname="sandbox",
                    network_disabled=True,
                    labels=self._labels,
                    host_config=host_config,
                    environment={
                        "HOME": WORKDIR,
                        "LANG": "C.UTF-8",
                        "PYTHONDONTWRITEBYTECODE": "1",
                        "AGENTRL_AGENT_STATE": STATE_DIR,
                        "AGENTRL_AGENT_WATCHDOG_S": str(self.watchdog_s),
                    },
                )
            except self._errors.ImageNotFound:
                raise InvalidRequest(f"image {image!r} is not on this Docker engine") from None
            except self._errors.APIError as exc:
                if exc.status_code == 400:  # e.g. more CPUs than the machine has
                    raise InvalidRequest(f"Docker refused the sandbox: {exc.explanation}") from None
                raise SandboxError(f"could not create a container: {exc}") from exc
            cid = container["Id"]
            try:
                attached = api.attach_socket(cid, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
                api.start(cid)
                link = AgentLink(AttachChannel(getattr(attached, "_sock", attached), keep=attached))
                link.call("hello", wait_s=60.0)
            except Exception as exc:
                self._remove(cid)
                raise SandboxError(f"the sandbox container did not start: {exc}") from exc
        return link, cid

    def _remove(self, cid: str, *, wait_s: float = 0.0) -> bool:
        """Remove a container; with `wait_s`, also wait until it is gone when its removal was already
        under way (409: by auto-removal, or by another backend's sweep), since until then the
        engine still lists it. True once it is gone (or, without `wait_s`, on its way out)."""
        try:
            self.docker.api.remove_container(cid, force=True)
            return True
        except self._errors.NotFound:
            return True
        except self._errors.APIError as exc:
            if exc.status_code != 409:
                log.warning("could not remove container %s: %s", cid[:12], exc)
                return False
        if wait_s <= 0:
            return True
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not self.docker.api.containers(all=True, filters={"id": cid}):
                return True
            time.sleep(0.05)
        log.warning("container %s was still being removed after %g s", cid[:12], wait_s)
        return False

    def _acquire(self, spec: SandboxSpec) -> tuple[AgentLink, Any]:
        key = self._key(spec)
        if self.pool_size > 0:
            with self._lock:
                queue = self._pool.get(key)
                # each image's default shape is kept warm; odd shapes are started when asked for
                default_shape = key[1:] == self._key(self.defaults)[1:]
                if queue is None and default_shape and len(self._pool) < MAX_POOL_KEYS:
                    queue = self._pool[key] = deque()
                warm = queue.popleft() if queue else None
            self._pool_wanted.set()
            if warm is not None and not warm[0].dead:
                return warm
        return self._start(key)

    def _release(self, handle: Any) -> None:
        try:
            self._remover.submit(self._remove, handle)
        except RuntimeError:  # shut down: remove inline
            self._remove(handle)

    def _fill_loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                wanted = [key for key, queue in self._pool.items() if len(queue) < self.pool_size]
            for key in wanted:
                try:
                    warm = self._start(key)
                except Exception as exc:
                    if self._stop.is_set():
                        return
                    log.warning("warm pool: %s", exc)
                    self._stop.wait(5.0)
                    continue
                with self._lock:
                    if self._stop.is_set():
                        self._release(warm[1])
                        return
                    self._pool[key].append(warm)
            if not wanted or self._all_full():
                self._pool_wanted.wait(1.0)
                self._pool_wanted.clear()

    def warm_count(self) -> int:
        with self._lock:
            return sum(len(queue) for queue in self._pool.values())

    def _all_full(self) -> bool:
        with self._lock:
            return all(len(queue) >= self.pool_size for queue in self._pool.values())

    # -- housekeeping ----------------------------------------------------------------------------
    def _links(self) -> list[AgentLink]:
        with self._lock:
            warm = [link for queue in self._pool.values() for link, _ in queue]
        return super()._links() + warm

    def _watch_events(self) -> None:
        """Mark a sandbox dead the moment Docker says its container died or was paused."""
        try:
            for event in self._events:
                why = DEAD_EVENTS.get(event.get("status") or event.get("Action", ""))
                cid = event.get("id") or event.get("Actor", {}).get("ID")
                if why is None or not cid:
                    continue
                with self._lock:
                    links = [s.link for s, handle in self._sandboxes.values() if handle == cid]
                    links += [link for q in self._pool.values() for link, c in q if c == cid]
                for link in links:
                    link.fail(f"{why} (Docker event '{event.get('status')}')")
        except Exception as exc:  # the stream ends when the backend closes, or the engine went away
            if not self._stop.is_set():
                log.warning("Docker event stream ended: %s", exc)

    def reap_orphans(self, wait_s: float = ORPHAN_REMOVAL_WAIT_S) -> int:
        """Remove labelled containers whose owner process is gone (or that are too old), and return
        only once they are gone: the backend is handed out after its first sweep, and a container
        whose removal another sweep has begun is still listed until that removal ends."""
        orphans = []
        for container in self.docker.api.containers(all=True, filters={"label": LABEL}):
            labels = container.get("Labels") or {}
            if labels.get(f"{LABEL}.owner") == getattr(self, "owner", None):
                continue
            too_old = time.time() - container.get("Created", 0) > CONTAINER_MAX_AGE_S
            if too_old or not _owner_alive(labels):
                orphans.append(container["Id"])
        left = [cid for cid in orphans if not self._remove(cid, wait_s=wait_s)]
        if orphans:
            log.info("removed %d orphaned sandbox containers", len(orphans) - len(left))
        if left:
            log.warning("%d orphaned sandbox containers could not be removed yet", len(left))
        self.orphans_left = len(left)
        return len(orphans) - len(left)

    def _periodic(self) -> None:
        if time.monotonic() - self._last_orphan_sweep >= self._orphan_interval_s:
            self._last_orphan_sweep = time.monotonic()
            self.reap_orphans()

    def container_ids(self) -> list[str]:
        """Ids of the containers this backend owns (live sandboxes and the warm pool)."""
        found = self.docker.api.containers(all=True, filters={"label": f"{LABEL}.owner={self.owner}"})
        return [c["Id"] for c in found]

    def close(self) -> None:
        super().close()
        self._events.close()
        with self._lock:
            warm = [cid for queue in self._pool.values() for _, cid in queue]
            for queue in self._pool.values():
                for link, _ in queue:
                    link.close()
                queue.clear()
        for cid in warm:
            self._release(cid)
        self._remover.shutdown(wait=True)
        for cid in self.container_ids():  # anything a racing pool start left behind
            self._remove(cid)
