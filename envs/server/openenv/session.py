"""OpenEnv's stateful WebSocket protocol, so that OpenEnv's own client drives agentrl envs.

One connection is one session and one episode in the shared registry (so capacity, TTL, metrics
and shutdown apply to it as to any other episode); closing the connection closes the episode.
OpenEnv's observation has no `truncated` and no `info`, so both travel inside the observation
object, next to the text, and nothing is lost.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from agentrl.protocol import ErrorCode, check_finite, dumps
from agentrl.server.call_answers import ApiError
from agentrl.server.episodes import EpisodeRegistry, LiveEpisode

SCHEMA: dict[str, Any] = {
    "action": {"type": "object", "properties": {"action": {"type": "string"}}, "required": ["action"]},
    "observation": {
        "type": "object",
        "properties": {
            "text": {"type": "string"}, "terminated": {"type": "boolean"}, "truncated": {"type": "boolean"},
            "info": {"type": "object"}, "episode_id": {"type": "string"},
        },
    },
    "state": {
        "type": "object",
        "properties": {"episode_id": {"type": "string"}, "step_count": {"type": "integer"},
                       "env_id": {"type": "string"}},
    },
}

_WS_CODES = {
    ErrorCode.CAPACITY: "CAPACITY_REACHED",
    ErrorCode.UNKNOWN_ENV: "SESSION_ERROR",
    ErrorCode.SHUTTING_DOWN: "SESSION_ERROR",
    ErrorCode.UNKNOWN_EPISODE: "SESSION_ERROR",
    ErrorCode.EPISODE_CLOSED: "SESSION_ERROR",
    ErrorCode.EPISODE_EXPIRED: "SESSION_ERROR",
    ErrorCode.ENV_REJECTED: "VALIDATION_ERROR",
    ErrorCode.ACTION_TOO_LARGE: "VALIDATION_ERROR",
}


def _error(message: str, code: str) -> str:
    return json.dumps({"type": "error", "data": {"message": message, "code": code}})


def _observation(episode_id: str, text: str, reward: float | None, terminated: bool, truncated: bool,
                 info: dict[str, Any]) -> bytes:
    """OpenEnv's observation message: a step's fields (or a reset's, with no reward) in the shape
    OpenEnv's protocol fixes, which has no room for the step's own encoding (`encode_step`)."""
    observation = {"text": text, "terminated": terminated, "truncated": truncated, "info": info,
                   "episode_id": episode_id}
    return dumps({"type": "observation",
                  "data": {"observation": observation, "reward": reward, "done": terminated or truncated}})


async def serve_session(websocket: WebSocket, registry: EpisodeRegistry, env_id: str | None) -> None:
    await websocket.accept()
    episode: LiveEpisode | None = None
    try:
        while True:
            raw = await websocket.receive_text()
            try:
                message = check_finite(json.loads(raw))
            except RecursionError:
                await websocket.send_text(_error("Invalid JSON: nested too deeply", "INVALID_JSON"))
                continue
            except ValueError as exc:  # not JSON, or numbers JSON does not have (NaN, Infinity)
                await websocket.send_text(_error(f"Invalid JSON: {exc}", "INVALID_JSON"))
                continue
            if not isinstance(message, dict):
                await websocket.send_text(_error("a message must be a JSON object", "VALIDATION_ERROR"))
                continue
            kind = message.get("type")
            data = message.get("data") or {}
            if kind == "close":
                break
            if not isinstance(data, dict):
                await websocket.send_text(_error("'data' must be a JSON object", "VALIDATION_ERROR"))
                continue
            try:
                if kind == "reset":
                    episode, reply = await _reset(registry, episode, env_id, data)
                elif kind == "step":
                    reply = await _step(registry, episode, data)
                elif kind == "state":
                    reply = _state(episode)
                else:
                    await websocket.send_text(_error(f"Unknown message type: {kind}", "UNKNOWN_TYPE"))
                    continue
            except ApiError as exc:
                await websocket.send_text(_error(exc.message, _WS_CODES.get(exc.code, "EXECUTION_ERROR")))
                continue
            await websocket.send_text(reply.decode())
    except WebSocketDisconnect:
        pass
    finally:
        if episode is not None:
            await registry.close(episode.episode_id, "disconnect")


async def _reset(
    registry: EpisodeRegistry, episode: LiveEpisode | None, env_id: str | None, data: dict[str, Any]
) -> tuple[LiveEpisode, bytes]:
    seed = data.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise ApiError(400, ErrorCode.ENV_REJECTED, "seed must be a non-negative integer")
    options = data.get("options")
    if options is not None and not isinstance(options, dict):
        raise ApiError(400, ErrorCode.ENV_REJECTED, "options must be a JSON object")
    wanted = data.get("env_id") or env_id
    if episode is not None and episode.episode_id in registry.episodes and wanted in (None, episode.env_id):
        first = await registry.reset(episode, seed, options)
    else:
        if episode is not None:
            await registry.close(episode.episode_id, "client")
        if not wanted:
            raise ApiError(400, ErrorCode.UNKNOWN_ENV, "no env chosen: send 'env_id' in the reset data "
                           "or connect to /openenv/<env_id>/ws")
        env_kwargs = data.get("env_kwargs")
        if env_kwargs is not None and not isinstance(env_kwargs, dict):
            raise ApiError(400, ErrorCode.ENV_REJECTED, "env_kwargs must be a JSON object")
        created, first = await registry.create(wanted, seed, options, env_kwargs)
        assert created is not None  # no request id: the episode was made just now
        episode = created
    reply = _observation(episode.episode_id, first["observation"], None, False, False, first["info"])
    return episode, reply


async def _step(registry: EpisodeRegistry, episode: LiveEpisode | None, data: dict[str, Any]) -> bytes:
    if episode is None:
        raise ApiError(409, ErrorCode.EPISODE_OVER, "send a reset before the first step")
    action = data.get("action", data.get("message"))
    if not isinstance(action, str):
        raise ApiError(400, ErrorCode.ENV_REJECTED, "step data must carry the action text as 'action'")
    result, _ = await registry.step(episode.episode_id, action)
    return _observation(episode.episode_id, result.observation, result.reward, result.terminated,
                        result.truncated, result.info)


def _state(episode: LiveEpisode | None) -> bytes:
    if episode is None:
        return dumps({"type": "state", "data": {"episode_id": None, "step_count": 0}})
    return dumps({"type": "state", "data": {"episode_id": episode.episode_id, "step_count": episode.turns,
                                            "env_id": episode.env_id, "done": episode.over}})
