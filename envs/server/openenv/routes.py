"""OpenEnv's routes on the episode server: its WebSocket at `/ws` (the server's default env) and at
`/openenv/{env_id}/ws` (any served env), its `/schema` and `/metadata`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, WebSocket

from agentrl import __version__
from agentrl.server.config import ServerConfig
from agentrl.server.episodes import EpisodeRegistry
from agentrl.server.openenv import session


def openenv_router(registry: EpisodeRegistry, config: ServerConfig) -> APIRouter:
    """The routes; the default env is read from `config` at each connection."""
    router = APIRouter()

    @router.websocket("/ws")
    async def openenv_default(websocket: WebSocket) -> None:
        await session.serve_session(websocket, registry, config.default_env_id)

    @router.websocket("/openenv/{env_id:path}/ws")
    async def openenv_for_env(websocket: WebSocket, env_id: str) -> None:
        await session.serve_session(websocket, registry, env_id)

    @router.get("/schema")
    async def openenv_schema() -> dict[str, Any]:
        return session.SCHEMA

    @router.get("/metadata")
    async def openenv_metadata() -> dict[str, Any]:
        return {"name": "agentrl", "version": __version__, "envs": list(registry.env_ids),
                "default_env": config.default_env_id}

    return router
