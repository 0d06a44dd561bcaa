"""agentrl's wire format, the one module both the episode server and its clients import: the JSON
shapes of the episode API, their codec, the encoding of a step's result and of a batch or frame
item, how a client reads an item back, and the typed errors an error code becomes (written in
`agentrl.wire_errors`, imported from here).

Only pydantic and orjson are imported here (and the env core's `StepResult`), so that a rollout
worker can speak the protocol without loading FastAPI or anything of the server. Every error the
server sends has one shape (`ErrorBody`) and a stable `code`, which the clients turn into typed
exceptions (`error_from`). A step's result is `agentrl.core.StepResult` itself, on the wire as in
Python, encoded by `encode_step` wherever a step runs.

Besides the HTTP routes, `/v1/ws` carries an episode's whole life over one persistent WebSocket,
many calls at a time: the client sends `StepFrame`s (`{"id": 7, "steps": [item, ...]}`, binary or
text JSON) whose items are steps (`BatchItem`) or, marked by `op`, the calls that start and end
episodes (`CreateCall`, `ResetCall`, `CloseCall`, `ForkCall`), and gets back, in any order,
`{"id": 7, "results": [BatchResult, ...]}` with one result per item in the frame's order (a
step's `StepResult`, or the body the item's HTTP route answers), or `{"id": 7, "status": 422,
"error": ErrorBody}` for a frame it could not read. Items of one episode run in the frame's order.
`POST /v1/step` answers `{"results": [BatchResult, ...]}` with the same items.
"""

from __future__ import annotations

import json
import math
import operator
import re
from typing import Annotated, Any, Literal, NamedTuple

import orjson
from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Strict, Tag

from agentrl.core.results import StepResult
from agentrl.serving.names import HolderState
from agentrl.serving.openapi import WholeNumber
from agentrl.wire_errors import *  # noqa: F403 - the wire format's errors, re-exported whole (its __all__)

API_PREFIX = "/v1"
MUX_PATH = f"{API_PREFIX}/ws"
CLUSTER_PATH = f"{API_PREFIX}/cluster"
# the client key every agentrl client sends: an episode made with one is reachable only with it (or by
# the operator's token), and `GET /v1/episodes` lists the caller's own (`agentrl.server.owners`)
CLIENT_KEY_HEADER = "X-Agentrl-Client"
MAX_CLIENT_KEY_CHARS = 128
# a client key is 1 to 128 of these: compared whole, never cut, so two keys that differ anywhere
# reach different episodes; a key outside the rule is refused (400), not mended
CLIENT_KEY = re.compile(rf"[A-Za-z0-9._:-]{{1,{MAX_CLIENT_KEY_CHARS}}}")
MAX_REQUEST_ID_CHARS = 128
MAX_BATCH = 1024
MAX_FORKS = 64  # forks one request may ask for; capacity still bounds them all
SEED_MAX = 2**63 - 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def check_client_key(key: str) -> str:
    """`key` itself if it is a valid client key (`CLIENT_KEY`), else a ValueError saying why: the
    server refuses such a request and a client refuses to be made with such a key."""
    if CLIENT_KEY.fullmatch(key) is None:
        shown = key if len(key) <= 40 else f"{key[:40]}... ({len(key)} characters)"
        raise ValueError(f"invalid client key {shown!r}: a client key ({CLIENT_KEY_HEADER}) is 1 to "
                         f"{MAX_CLIENT_KEY_CHARS} letters, digits, '.', '_', ':' or '-'")
    return key


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


# a seed as the schema says it: an integer (`3` or `3.0`), never `false` or `"3"`
Seed = Annotated[int, Strict(), Field(ge=0, le=SEED_MAX), WholeNumber]

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
    package: str | None = Field(None, description="The Python distribution that provides the env (for a "
                                "client to pin), or null when no installed distribution owns its module.")
    version: str | None = Field(None, description="That distribution's installed version.")
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
    seed: Seed | None = None
    options: JsonObject | None = Field(None, description="Passed to env.reset(options=...).")
    env_kwargs: JsonObject | None = Field(None, description="Passed to the env's constructor.")
    request_id: str | None = Field(None, max_length=MAX_REQUEST_ID_CHARS,
                                   description="A retried create with the same id returns the same episode.")
    replay_of: str | None = Field(None, max_length=200,
                                  description="The id of an episode whose server was lost and which this "
                                  "create replays (counted in /metrics).")


class ResetEpisode(_Model):
    seed: Seed | None = None
    options: JsonObject | None = None
    request_id: str | None = Field(None, max_length=MAX_REQUEST_ID_CHARS,
                                   description="A retried reset with the same id answers the same reset.")


class EpisodeCreated(BaseModel):
    episode_id: str
    env_id: str
    observation: str
    info: dict[str, Any]
    idle_ttl_s: float | None = Field(
        None, description="The server closes the episode once it has idled this long (no step or reset).")
    max_age_s: float | None = Field(None, description="The server closes the episode at this age.")


class ForkEpisode(_Model):
    n: Annotated[int, Strict(), Field(ge=1, le=MAX_FORKS), WholeNumber] = Field(
        1, description="How many forks: all are made, or none.")
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
    state: HolderState = Field(
        description="`up` takes new episodes; `unresponsive` missed its last health checks and takes "
        "none until it answers again; `draining` finishes its live ones and takes none.")
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


# --- a step's result and a batch's items, written once (server) and read once (clients) ----------
encode_step = dumps  # a step's result (`StepResult`), as `POST .../step` answers it and an item carries it


_STEP_FIELDS = operator.itemgetter("observation", "reward", "terminated", "truncated", "info")


def step_result(d: dict[str, Any]) -> StepResult:
    """A `StepResult` from its JSON object, built as the server built it (`StepResult.of`)."""
    return StepResult.of(_STEP_FIELDS(d))


def encode_error(code: str, message: str) -> bytes:
    """An `ErrorBody`."""
    return dumps({"error": code, "message": message})


def encode_item(episode_id: str | None, status: int, body: bytes) -> bytes:
    """A `BatchResult` answered with `body` (already encoded: a step's result, or the body of the
    item's HTTP route)."""
    return b'{"episode_id":%s,"status":%d,"result":%s,"error":null}' % (dumps(episode_id), status, body)


def encode_error_item(episode_id: str | None, status: int, error: bytes,
                      retry_after: str | None = None) -> bytes:
    """A `BatchResult` answered with the `ErrorBody` `error` (and a 429's seconds to wait)."""
    item = b'{"episode_id":%s,"status":%d,"result":null,"error":%s' % (dumps(episode_id), status, error)
    return item + (b"}" if retry_after is None else b',"retry_after":%s}' % retry_after.encode())


def encode_closed(episode_id: str) -> bytes:
    """A close's answer (`Closed`)."""
    return b'{"episode_id":%s,"closed":true}' % dumps(episode_id)


def encode_results(items: list[bytes]) -> bytes:
    """`POST /v1/step`'s answer (`BatchResults`) from its encoded items."""
    return b'{"results":[' + b",".join(items) + b"]}"


def encode_reply(frame_id: int, items: list[bytes]) -> bytes:
    """A `/v1/ws` reply frame from its encoded items."""
    return b'{"id":%d,"results":[%s]}' % (frame_id, b",".join(items))


class Answer(NamedTuple):
    """What the server said to one call, whichever way it travelled: its status, its JSON body (the
    result, or the `ErrorBody`), and any `Retry-After` (a tuple: one is built per step, and a frozen
    dataclass costs several times more to build)."""

    status: int
    body: Any
    retry_after: float | None = None


def read_item(item: dict[str, Any]) -> Answer:
    """The `Answer` of one `BatchResult` (of `POST /v1/step` or a `/v1/ws` frame): its status says
    whether it holds a result or an error."""
    status = item["status"]
    if status < 400:
        return Answer(status, item["result"])
    return Answer(status, item["error"], item.get("retry_after"))
