"""Forking a live episode over HTTP, and reading an episode's trajectory record.

`POST /v1/episodes/{id}/fork` turns `env.fork(n)` (see `agentrl.core.base`) into n new episodes of
the registry: each counts against capacity (n that do not fit are refused together, nothing made),
gets its own id under this server's holder and its own idle and age clocks, and starts with a copy
of its parent's transcript, so a watcher sees where it came from. The fork runs on a worker thread
under the parent's lock, so it copies a state no step is changing. A retried fork with the same
`request_id` answers the forks already made rather than making more.

`GET /v1/episodes/{id}/trajectory` is the env's own record (`env.trajectory()`), with the forks as
children; it is built under the episode's lock too.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from agentrl.protocol import (
    API_PREFIX,
    ErrorBody,
    ErrorCode,
    Forked,
    ForkEpisode,
    TrajectoryRecord,
    dumps,
    loads,
)
from agentrl.server.answers import ApiError, Remembered, env_raised, gone
from agentrl.server.episodes import EpisodeRegistry, LiveEpisode
from agentrl.server.owners import CALLER

JSON = "application/json"
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (400, 401, 404, 409, 413, 422, 429, 500, 503)
}


def _latest(ep: LiveEpisode) -> dict[str, Any]:
    """The parent's latest observation and info: the last step's, or the reset's before any step."""
    transcript = ep.transcript
    latest = loads(transcript.steps[-1][1] if transcript.steps else transcript.first)
    return {"observation": latest["observation"], "info": latest["info"]}


def _fork(env: Any, n: int) -> list[Any]:
    children = env.fork(n)
    if len(children) != n:
        for child in children:
            child.close()
        raise RuntimeError(f"fork({n}) returned {len(children)} envs")
    return list(children)


def _record(env: Any) -> bytes:
    return dumps(env.trajectory())


class Forks:
    """The fork and trajectory operations on one registry."""

    def __init__(self, registry: EpisodeRegistry) -> None:
        self.registry = registry
        # (client key, parent, request_id) -> forks made
        self._requests = Remembered(registry.config.max_episodes)

    async def fork(self, episode_id: str, n: int, request_id: str | None = None) -> list[dict[str, Any]]:
        """n new episodes in `episode_id`'s state; each item is an `EpisodeForked`."""
        registry = self.registry
        if registry.shutting_down:
            raise ApiError(503, ErrorCode.SHUTTING_DOWN, "the server is shutting down")
        parent = registry.get(episode_id)
        key = None if request_id is None else (CALLER.get().key, episode_id, request_id)
        return await self._requests.once(key, lambda: self._make(parent, n))

    async def _make(self, parent: LiveEpisode, n: int) -> list[dict[str, Any]]:
        registry = self.registry
        with registry.reserve(n):
            async with parent.lock:
                parent.check_open("fork it before its last step")
                try:
                    envs = await registry.dispatch.run(f"{parent.env_id}:fork", _fork, parent.env, n)
                except Exception as exc:
                    raise env_raised(parent, exc, "forking") from exc
                parent.last_used = time.monotonic()
                latest = _latest(parent)
                children = [self._child(parent, env) for env in envs]
            for child in children:
                registry.admit(child)
        return [{"episode_id": child.episode_id, "env_id": child.env_id, **latest, **registry.lifetimes,
                 "parent_id": parent.episode_id, "turns": child.turns} for child in children]

    def _child(self, parent: LiveEpisode, env: Any) -> LiveEpisode:
        child = self.registry.new_episode(parent.env_id, env, parent.seed)
        child.owner = parent.owner  # a fork belongs to whoever holds its parent, the operator's too
        child.turns = parent.turns
        child.transcript = dataclasses.replace(parent.transcript, steps=deque(parent.transcript.steps))
        return child

    async def trajectory(self, episode_id: str) -> bytes:
        """The episode's trajectory record, encoded."""
        ep = self.registry.get(episode_id)
        async with ep.lock:
            if ep.closed:
                raise gone(ep)
            try:
                return await self.registry.dispatch.run(f"{ep.env_id}:trajectory", _record, ep.env)
            except Exception as exc:
                raise ApiError(500, ErrorCode.ENV_ERROR, f"{ep.env_id} raised while recording its "
                               f"trajectory: {type(exc).__name__}: {exc}") from exc


def fork_router(forks: Forks) -> APIRouter:
    router = APIRouter()

    @router.post(f"{API_PREFIX}/episodes/{{episode_id}}/fork", response_model=Forked, status_code=201,
                 responses=ERRORS)
    async def fork_episode(episode_id: str, req: ForkEpisode) -> Response:
        """n new episodes continuing exactly as this one would; all are made, or none."""
        made = await forks.fork(episode_id, req.n, req.request_id)
        return Response(dumps({"episodes": made}), 201, media_type=JSON)

    @router.get(f"{API_PREFIX}/episodes/{{episode_id}}/trajectory", response_model=TrajectoryRecord,
                responses=ERRORS)
    async def get_trajectory(episode_id: str) -> Response:
        """The episode as a record: steps with their tool calls, results and state changes; forks as
        children."""
        return Response(await forks.trajectory(episode_id), media_type=JSON)

    return router
