"""Read-only routes for watching episodes: the list of episodes on a server and one's transcript.

The episode API lets a client act on episodes it created; these let a person or a script follow
any of them (the page at `/ui` polls both). They read what the registry already keeps (see
`transcript.py`) and never touch an env, so watching costs the rollouts nothing. Recently closed
episodes are listed and readable too, until `RecentlyClosed` lets them go.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import BaseModel, Field

from agentrl.core import StepResult
from agentrl.protocol import API_PREFIX, ErrorBody, dumps
from agentrl.server.episodes import EpisodeRegistry, LiveEpisode
from agentrl.server.owners import CALLER
from agentrl.server.transcript import ClosedEpisode

JSON = "application/json"
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorBody} for code in (401, 404, 422)}


class EpisodeSummary(BaseModel):
    episode_id: str
    env_id: str
    status: Literal["running", "done", "closed"]
    seed: int | None
    steps: int = Field(description="Steps since the last reset.")
    age_s: float
    last_reward: float | None
    return_: float = Field(alias="return", description="Sum of the rewards since the last reset.")
    started: float = Field(description="Wall-clock time (Unix seconds) of the last reset.")


class EpisodeList(BaseModel):
    episodes: list[EpisodeSummary] = Field(description="Live episodes, newest first, then recently closed.")


class FirstObservation(BaseModel):
    observation: str
    info: dict[str, Any]


class TranscriptStep(BaseModel):
    index: int = Field(description="0-based number of the step since the last reset.")
    action: str
    result: StepResult


class TranscriptPage(BaseModel):
    """An episode's watch transcript from step `start` on (`GET .../transcript`)."""

    episode: EpisodeSummary
    first: FirstObservation
    dropped: int = Field(description="Oldest steps no longer kept (the transcript has a byte budget).")
    steps: list[TranscriptStep] = Field(description="Kept steps numbered `start` and later.")


def summary(ep: LiveEpisode | ClosedEpisode) -> dict[str, Any]:
    t = ep.transcript
    if isinstance(ep, ClosedEpisode):
        status, age = "closed", ep.age_s
    else:
        status, age = ("done" if ep.over else "running"), time.monotonic() - ep.created
    return {"episode_id": ep.episode_id, "env_id": ep.env_id, "status": status, "seed": ep.seed,
            "steps": t.count, "age_s": round(age, 3), "last_reward": t.last_reward,
            "return": t.return_, "started": round(t.started, 3)}


def find(registry: EpisodeRegistry, episode_id: str) -> LiveEpisode | ClosedEpisode:
    """A live episode, else a recently closed one, else the registry's own 404: each only where the
    caller may reach it (`agentrl.server.owners`)."""
    closed = registry.recently_closed.get(episode_id)
    if episode_id not in registry.episodes and closed is not None and CALLER.get().reaches(closed.owner):
        return closed
    return registry.get(episode_id)


def listing(registry: EpisodeRegistry) -> list[dict[str, Any]]:
    """The caller's own episodes, live then recently closed (the operator's list holds everyone's)."""
    caller = CALLER.get()
    live = sorted((ep for ep in registry.episodes.values() if caller.lists(ep.owner)),
                  key=lambda ep: ep.created, reverse=True)
    closed = [c for c in reversed(registry.recently_closed.episodes.values())
              if c.episode_id not in registry.episodes and caller.lists(c.owner)]
    return [summary(ep) for ep in live] + [summary(ep) for ep in closed]


def transcript_bytes(ep: LiveEpisode | ClosedEpisode, start: int) -> bytes:
    """The transcript's JSON, spliced from the step results as they were encoded when they ran."""
    t = ep.transcript
    steps = b",".join(b'{"index":%d,"action":%s,"result":%s}' % (i, dumps(action), body)
                      for i, action, body in t.since(start))
    return (b'{"episode":' + dumps(summary(ep)) + b',"first":' + t.first
            + b',"dropped":%d,"steps":[' % t.dropped + steps + b"]}")


def watch_router(registry: EpisodeRegistry) -> APIRouter:
    router = APIRouter()

    @router.get(f"{API_PREFIX}/episodes", response_model=EpisodeList, responses=ERRORS)
    async def list_episodes() -> Response:
        return Response(dumps({"episodes": listing(registry)}), media_type=JSON)

    @router.get(f"{API_PREFIX}/episodes/{{episode_id}}/transcript", response_model=TranscriptPage,
                responses=ERRORS)
    async def get_transcript(episode_id: str, start: int = Query(0, ge=0, le=2**31)) -> Response:
        """Follow an episode as it grows: ask again with `start` set to the next step's index."""
        return Response(transcript_bytes(find(registry, episode_id), start), media_type=JSON)

    return router
