"""Holders as child processes of this one, on loopback ports of this machine: started, restarted, stopped.

Each child runs its server's unchanged `serve` command on its own port under its own holder name
(`<base>-p<i>`). A child that exits is reported and started again on its port under its name (at
most `MAX_RESTARTS` times), so a client finds it where it was, without the work it held (the client
replays that). The children die with the parent however it ends (`children.die_with_parent`), and
a parent that stops normally terminates them first.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

from agentrl.serving.children import free_port, spawn_child, stop_process
from agentrl.serving.holders import Holder, HolderPool, InfoT, PoolSettings

MAX_RESTARTS = 5


class ProcessHolders(HolderPool[InfoT]):
    """Holders as children of this process; `command(name, port)` is one holder's command line.

    `info` and `settings` are `HolderPool`'s; `stop_timeout_s` is how long a child may take to close
    what it holds after SIGTERM before it is killed.
    """

    def __init__(self, info: type[InfoT], settings: PoolSettings, command: Callable[[str, int], list[str]],
                 *, host: str, base_name: str, stop_timeout_s: float) -> None:
        super().__init__(info, settings)
        self.command = command
        self.host = host
        self.base_name = base_name
        self.stop_timeout_s = stop_timeout_s
        self._made = 0

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        for name, value in self.settings.environment.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        return env

    def _spawn(self, holder: Holder) -> None:
        port = int(holder.url.rsplit(":", 1)[1])
        holder.handle = spawn_child(self.command(holder.name, port), self._environment())

    async def _launch(self, count: int) -> list[Holder]:
        made = []
        for _ in range(count):
            name = f"{self.base_name}-p{self._made}"
            self._made += 1
            holder = Holder(name, f"http://{self.host}:{free_port(self.host)}")
            self._spawn(holder)
            made.append(holder)
        return made

    def _running(self, holder: Holder) -> bool:
        return holder.handle.poll() is None

    async def _lost(self, holder: Holder) -> None:
        code = holder.handle.returncode
        if holder.state == "draining":
            self.log.warning("%s %s exited with code %s while draining", self.noun, holder.name, code)
            await super()._lost(holder)
            return
        if holder.restarts >= MAX_RESTARTS:
            self.log.error("%s %s exited with code %s; not restarted (%d restarts already)",
                           self.noun, holder.name, code, holder.restarts)
            await super()._lost(holder)
            return
        holder.restarts += 1
        self.log.warning("%s %s exited with code %s; restarting it (restart %d of %d), its %s are lost",
                         self.noun, holder.name, code, holder.restarts, MAX_RESTARTS, self.held)
        holder.state, holder.load, holder.misses = "starting", 0, 0
        self._spawn(holder)

    async def _retire(self, holder: Holder) -> None:
        await asyncio.to_thread(stop_process, holder.handle, self.stop_timeout_s)
