"""The JSON shapes of agentrl's episode API and their codec, shared by the server and the clients.

Only pydantic and orjson are imported here so that a rollout worker can speak the protocol without
loading FastAPI. Every error the server sends has one shape (`ErrorBody`) and a stable `code`, which
the clients turn into typed exceptions. A step's result is `agentrl.core.StepResult` itself, on the
wire as in Python.

Besides the HTTP routes, `/v1/ws` carries an episode's whole life over one persistent WebSocket,
many calls at a time: the client sends `StepFrame`s (`{"id": 7, "steps": [item, ...]}`, binary or
text JSON) whose items are steps (`BatchItem`) or, marked by `op`, the calls that start and end
episodes (`CreateCall`, `ResetCall`, `CloseCall`, `ForkCall`), and gets back, in any order,
`{"id": 7, "results": [BatchResult, ...]}` with one result per item in the frame's order (a
step's `StepResult`, or the body the item's HTTP route answers), or `{"id": 7, "status": 422,
"error": ErrorBody}` for a frame it could not read. Items of one episode run in the frame's order.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Literal

import orjson
from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag

from agentrl.core.results import StepResult

API_PREFIX = "/v1"
MUX_PATH = f"{API_PREFIX}/ws"
CLUSTER_PATH = f"{API_PREFIX}/cluster"
MAX_REQUEST_ID_CHARS = 128
MAX_BATCH = 1024
MAX_FORKS = 64  # forks one request may ask for; capacity still bounds them all
SEED_MAX = 2**63 - 1


class ErrorCode:
    """Stable error codes; the HTTP status says the class of error, the code says which."""

    INVALID_REQUEST = "invalid_request"  # 400/422: malformed JSON, wrong types
    ACTION_TOO_LARGE = "action_too_large"  # 413
    BODY_TOO_LARGE = "body_too_large"  # 413
    UNAUTHORIZED = "unauthorized"  # 401
    UNKNOWN_ENV = "unknown_env"  # 404
    UNKNOWN_EPISODE = "unknown_episode"  # 404
    EPISODE_OVER = "episode_over"  # 409
    ENV_REJECTED = "env_rejected"  # 400: the env refused its constructor arguments or reset options
    CAPACITY = "capacity"  # 429
    SHUTTING_DOWN = "shutting_down"  # 503
    ENV_ERROR = "env_error"  # 500: the env itself raised while stepping (a bug in the env)
    NOT_FOUND = "not_found"  # 404 for unknown routes


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def non_finite_path(value: Any) -> str | None:
    """Where in `value` a NaN or infinite float sits (a dotted path), or None when there is none.

    Python's JSON reader accepts the tokens NaN and Infinity, which JSON does not have: an env
    handed `{"max_turns": NaN}` would compare every turn count false and never end. Walked with a
    stack, not recursion, so a body nested as deep as the reader allows cannot overflow here."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return path or "value"
        if isinstance(item, dict):
            stack.extend((f"{path}.{key}" if path else str(key), inner) for key, inner in item.items())
        elif isinstance(item, list):
            stack.extend((f"{path}.{i}" if path else str(i), inner) for i, inner in enumerate(item))
    return None


def check_finite(value: Any) -> Any:
    """`value` itself, or a ValueError naming where it holds NaN or Infinity."""
    where = non_finite_path(value)
    if where is not None:
        raise ValueError(f"{where}: NaN and Infinity are not JSON numbers")
    return value


# a free-form JSON object handed on to an env: any JSON value inside, but only finite numbers
JsonObject = Annotated[dict[str, Any], AfterValidator(check_finite)]


class ErrorBody(BaseModel):
    error: str = Field(description="Stable error code, e.g. 'unknown_episode'.")
    message: str = Field(description="What went wrong, for a person.")


class SpaceSpec(BaseModel):
    type: Literal["text"] = "text"
    max_length: int
    min_length: int = 0


class EnvSpec(BaseModel):
    env_id: str
    available: bool = True
    reason: str | None = Field(None, description="Why the env cannot be built here, when unavailable.")
    action_space: SpaceSpec | None = None
    observation_space: SpaceSpec | None = None
    tools: list[dict[str, Any]] = Field(default_factory=list, description="OpenAI function-tool specs.")
    default_options: dict[str, Any] = Field(default_factory=dict, description="Constructor defaults.")


class EnvList(BaseModel):
    envs: list[EnvSpec]


class CreateEpisode(_Model):
    env_id: str = Field(min_length=1, max_length=200, examples=["agentrl/Echo-v0"])
    seed: int | None = Field(None, ge=0, le=SEED_MAX)
    options: JsonObject | None = Field(None, description="Passed to env.reset(options=...).")
    env_kwargs: JsonObject | None = Field(None, description="Passed to the env's constructor.")
    request_id: str | None = Field(None, max_length=MAX_REQUEST_ID_CHARS,
                                   description="A retried create with the same id returns the same episode.")
    replay_of: str | None = Field(None, max_length=200,
                                  description="The id of an episode whose server was lost and which this "
                                  "create replays (counted in /metrics).")


class ResetEpisode(_Model):
    seed: int | None = Field(None, ge=0, le=SEED_MAX)
    options: JsonObject | None = None
    request_id: str | None = Field(None, max_length=MAX_REQUEST_ID_CHARS,
                                   description="A retried reset with the same id answers the same reset.")


class EpisodeCreated(BaseModel):
    episode_id: str
    env_id: str
    observation: str
    info: dict[str, Any]


class ForkEpisode(_Model):
    n: int = Field(1, ge=1, le=MAX_FORKS, description="How many forks: all are made, or none.")
    request_id: str | None = Field(None, max_length=MAX_REQUEST_ID_CHARS,
                                   description="A retried fork with the same id returns the same forks.")


class EpisodeForked(EpisodeCreated):
    """A fork: a new episode in its parent's state, whose `observation` and `info` are the parent's
    latest (what the next action answers)."""

    parent_id: str
    turns: int = Field(description="Steps taken so far: the parent's when it was forked.")


class Forked(BaseModel):
    episodes: list[EpisodeForked]


class TrajectoryCall(BaseModel):
    name: str | None
    arguments: dict[str, Any] | None
    ok: bool
    result: str


class TrajectoryStep(BaseModel):
    action: str
    calls: list[TrajectoryCall]
    observation: str
    reward: float
    terminated: bool
    truncated: bool
    state_change: dict[str, Any] | None = Field(description="What the step changed in the world, if it says.")


class TrajectoryFork(BaseModel):
    at_step: int = Field(description="Steps the parent had taken when it was forked.")
    trajectory: TrajectoryRecord = Field(description="The fork's record: its steps after `at_step`.")


class TrajectoryRecord(BaseModel):
    """An episode as a tree: its steps, with each fork's record as a child (`agentrl.trajectory/1`)."""

    format: Literal["agentrl.trajectory/1"]
    env_id: str | None
    task_id: str | None
    seed: int | None
    observation: str = Field(description="The first observation.")
    tools: list[dict[str, Any]]
    steps: list[TrajectoryStep]
    forks: list[TrajectoryFork]


class StepAction(_Model):
    action: str
    request_id: str | None = Field(None, max_length=MAX_REQUEST_ID_CHARS,
                                   description="A retried step with the same id returns the same result.")


class BatchItem(_Model):
    op: Literal["step"] = "step"
    episode_id: str = Field(min_length=1, max_length=200)
    action: str
    request_id: str | None = Field(None, max_length=MAX_REQUEST_ID_CHARS)


class BatchStep(_Model):
    steps: list[BatchItem] = Field(max_length=MAX_BATCH)


class BatchResult(BaseModel):
    """One item's outcome; exactly one of `result` and `error` is set."""

    episode_id: str | None = Field(description="The item's episode (a create's new one; null if none).")
    result: StepResult | dict[str, Any] | None = Field(
        None, description="A step's result, or the body its HTTP route answers (`EpisodeCreated`...).")
    error: ErrorBody | None = None
    status: int = Field(200, description="The HTTP status the item would have had on its own.")
    retry_after: int | None = Field(None, description="Seconds to wait before retrying, with a 429.")


class BatchResults(BaseModel):
    results: list[BatchResult]


class CreateCall(CreateEpisode):
    """A frame item that creates an episode, as `POST /v1/episodes` does."""

    op: Literal["create"]


class ResetCall(ResetEpisode):
    """A frame item that resets an episode, as `POST /v1/episodes/{id}/reset` does."""

    op: Literal["reset"]
    episode_id: str = Field(min_length=1, max_length=200)


class CloseCall(_Model):
    """A frame item that closes an episode, as `DELETE /v1/episodes/{id}` does; a retry with the
    same `request_id` answers `closed: true` again instead of `unknown_episode`."""

    op: Literal["close"]
    episode_id: str = Field(min_length=1, max_length=200)
    request_id: str | None = Field(None, max_length=MAX_REQUEST_ID_CHARS)


class ForkCall(ForkEpisode):
    """A frame item that forks an episode, as `POST /v1/episodes/{id}/fork` does."""

    op: Literal["fork"]
    episode_id: str = Field(min_length=1, max_length=200)


def _op(item: Any) -> str:
    """A frame item's kind: its `op`, a step where it has none."""
    if isinstance(item, dict):
        return item.get("op", "step")
    return getattr(item, "op", "step")


FrameItem = Annotated[
    Annotated[BatchItem, Tag("step")] | Annotated[CreateCall, Tag("create")]
    | Annotated[ResetCall, Tag("reset")] | Annotated[CloseCall, Tag("close")]
    | Annotated[ForkCall, Tag("fork")],
    Discriminator(_op),
]
LifecycleCall = CreateCall | ResetCall | CloseCall | ForkCall


class StepFrame(_Model):
    """One frame on `/v1/ws`: steps and lifecycle calls sent together, and the id their reply frame
    carries back."""

    id: int = Field(ge=0, le=SEED_MAX, strict=True)
    steps: list[FrameItem] = Field(max_length=MAX_BATCH)


class EpisodeStatus(BaseModel):
    episode_id: str
    env_id: str
    status: Literal["starting", "running", "done", "closed"]
    turns: int
    age_s: float
    idle_s: float
    seed: int | None


class Rendered(BaseModel):
    text: str | None


class Closed(BaseModel):
    episode_id: str
    closed: bool


class Health(BaseModel):
    status: Literal["healthy", "shutting_down"]
    live_episodes: int
    max_episodes: int


class HolderInfo(BaseModel):
    """One server process of a cluster: the name heading its episode ids, and where to reach it."""

    holder: str = Field(description="The name heading every episode id this process creates.")
    url: str = Field(description="Its base URL; every call naming one of its episodes goes here.")
    state: Literal["starting", "up", "draining", "down"] = Field(
        description="`up` takes new episodes; `draining` finishes its live ones and takes none.")
    live_episodes: int = Field(0, description="Live episodes at its last health check.")


def is_cluster_url(url: str) -> bool:
    """Whether `url` is a cluster's discovery URL (`.../v1/cluster`) rather than one server's."""
    return url.rstrip("/").endswith(CLUSTER_PATH)


class ClusterMap(BaseModel):
    """`GET /v1/cluster`: the holders behind one address, what a cluster client routes by."""

    holders: list[HolderInfo]


# --- codec ---------------------------------------------------------------------------------------
_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def _jsonable(value: Any) -> Any:
    """Fallback for values JSON has no type for (numpy arrays of objects, sets, anything else)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return repr(value)


def dumps(payload: Any) -> bytes:
    """Compact UTF-8 JSON; dataclasses such as `StepResult` encode as objects.

    orjson writes NaN as null; what it refuses (integers over 64 bits, lone surrogates) goes
    through the standard library instead, escaped, so any payload an env returns can be sent.
    """
    try:
        return orjson.dumps(payload, default=_jsonable, option=_OPTIONS)
    except orjson.JSONEncodeError:
        return json.dumps(payload, default=_standard, allow_nan=False, separators=(",", ":")).encode()


def _standard(value: Any) -> Any:
    if isinstance(value, StepResult):
        return value.__dict__
    return _jsonable(value)


loads = orjson.loads


def step_result(d: dict[str, Any]) -> StepResult:
    """A `StepResult` from its JSON object."""
    return StepResult(d["observation"], d["reward"], d["terminated"], d["truncated"], d["info"])
