"""Forking a live episode over HTTP, and reading an episode's trajectory record.

`POST /v1/episodes/{id}/fork` turns `env.fork(n)` (see `agentrl.core.base`) into n new episodes of
the registry, and `GET /v1/episodes/{id}/trajectory` answers the env's own record (`env.trajectory()`),
with the forks as children. Both are operations (`agentrl.server.operations.Fork`, `Trajectory`) run
by the registry's one runner (`EpisodeRegistry.later`), as creates, resets, steps and closes are: under
the episode's lock, so that they see a state no step is changing, their env call through the
dispatcher. A retried fork with the same `request_id` answers the forks already made rather than
making more.
"""

from __future__ import annotations

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
)
from agentrl.server.call_answers import ApiError, Remembered
from agentrl.server.episodes import EpisodeRegistry
from agentrl.server.operations import Fork, Made, Trajectory

JSON = "application/json"
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (400, 401, 404, 409, 413, 422, 429, 500, 503)
}


class Forks:
    """The fork and trajectory calls on one registry, whichever way they come (HTTP, `/v1/ws`)."""

    def __init__(self, registry: EpisodeRegistry) -> None:
        self.registry = registry
        self.made = Remembered(registry.config.max_episodes)  # (client key, parent, request_id) -> forks

    async def fork(self, episode_id: str, n: int, request_id: str | None = None) -> Made:
        """n new episodes in `episode_id`'s state; each item is an `EpisodeForked`."""
        registry = self.registry
        if registry.shutting_down:
            raise ApiError(503, ErrorCode.SHUTTING_DOWN, "the server is shutting down")
        return await registry.later(Fork(registry, registry.get(episode_id), n, request_id, self.made))

    async def trajectory(self, episode_id: str) -> bytes:
        """The episode's trajectory record, encoded."""
        return await self.registry.later(Trajectory(self.registry.get(episode_id)))


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
