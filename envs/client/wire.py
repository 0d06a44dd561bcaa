"""The clients' one core, with no I/O: each endpoint as a `Call`, the retry policy and the reading of answers.

`_Wire` describes every call (method, path, body, parser); `RetryPolicy.delay` is the one retry policy and
`_settled` the one reading of a call's last outcome. `EnvClient` and `AsyncEnvClient` (`agentrl.client`)
drive these with blocking I/O and with `await`, and a cluster's routing (`agentrl.client.cluster`) replays
them against another holder; kept apart from the clients so that the routing is built on this core and
not on the clients that hold it. Every call that changes an episode carries a `request_id`, so a retry
after a lost answer never creates, steps or closes twice. Nothing here imports the server.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx

from agentrl.core import StepResult
from agentrl.protocol import (
    API_PREFIX,
    CLIENT_KEY_HEADER,
    MUX_PATH,
    Answer,
    EnvSpec,
    EpisodeCreated,
    EpisodeForked,
    EpisodeStatus,
    ServerError,
    check_client_key,
    dumps,
    error_from,
    loads,
    read_item,
    step_result,
)

T = TypeVar("T")


# --- the wire format, once -----------------------------------------------------------------------
@dataclass(frozen=True)
class Call(Generic[T]):
    """One call: over HTTP, or over the step channel (`/v1/ws`) when `step`; then `body` is its frame
    item (a `BatchItem`, or a `CreateCall`, `ResetCall`, `CloseCall` or `ForkCall`). `op` names
    the operation (`_Wire`'s method that made it; None for calls about the server or its envs) and
    `episode_id` the episode it is about, so that a cluster's routing reads them here, not from the
    path or the body."""

    method: str
    path: str
    parse: Callable[[Any], T]
    body: dict[str, Any] | None = None
    step: bool = False
    op: str | None = None
    episode_id: str | None = None


def _batch_results(d: dict[str, Any]) -> list[StepResult | ServerError]:
    """`POST /v1/step`'s items, each read as an item of a `/v1/ws` frame is (`read_item`)."""
    return _frame_results([read_item(item) for item in d["results"]])


def _frame_results(answers: list[Answer]) -> list[StepResult | ServerError]:
    """A frame's answers (`step_frame`), each a `StepResult` or the error it carries."""
    return [step_result(body) if status < 400 else error_from(status, body, retry_after)
            for status, body, retry_after in answers]


def _new_id() -> str:
    """A fresh request id: 128 random bits, as a UUID4 carries, without building the UUID."""
    return os.urandom(16).hex()


class _Wire:
    """Requests and parsers of every endpoint; no I/O."""

    @staticmethod
    def health() -> Call[dict[str, Any]]:
        return Call("GET", "/health", dict)

    @staticmethod
    def envs() -> Call[list[EnvSpec]]:
        return Call("GET", f"{API_PREFIX}/envs", lambda d: [EnvSpec.model_validate(e) for e in d["envs"]])

    @staticmethod
    def env(env_id: str) -> Call[EnvSpec]:
        return Call("GET", f"{API_PREFIX}/envs/{env_id}", EnvSpec.model_validate)

    @staticmethod
    def create(env_id: str, seed: int | None, options: dict[str, Any] | None,
               env_kwargs: dict[str, Any] | None) -> Call[EpisodeCreated]:
        body = {"op": "create", "env_id": env_id, "seed": seed, "options": options, "env_kwargs": env_kwargs,
                "request_id": _new_id()}
        return Call("POST", MUX_PATH, EpisodeCreated.model_validate, body, step=True, op="create")

    @staticmethod
    def reset(episode_id: str, seed: int | None, options: dict[str, Any] | None) -> Call[EpisodeCreated]:
        body = {"op": "reset", "episode_id": episode_id, "seed": seed, "options": options,
                "request_id": _new_id()}
        return Call("POST", MUX_PATH, EpisodeCreated.model_validate, body, step=True, op="reset",
                    episode_id=episode_id)

    @staticmethod
    def step(episode_id: str, action: str, request_id: str | None) -> Call[StepResult]:
        body = {"episode_id": episode_id, "action": action, "request_id": request_id or _new_id()}
        return Call("POST", MUX_PATH, step_result, body, step=True, op="step", episode_id=episode_id)

    @staticmethod
    def step_batch(items: Sequence[tuple[str, str]]) -> Call[list[StepResult | ServerError]]:
        steps = [{"episode_id": e, "action": a, "request_id": _new_id()} for e, a in items]
        return Call("POST", f"{API_PREFIX}/step", _batch_results, {"steps": steps}, op="step_batch")

    @staticmethod
    def step_frame(episode_id: str, actions: Sequence[str]) -> Call[list[StepResult | ServerError]]:
        """Steps of one episode in one step-channel frame of their own, run in their order: a
        round trip for them all (a lost episode's replay). Its body is a frame, not an item."""
        steps = [{"episode_id": episode_id, "action": a, "request_id": _new_id()} for a in actions]
        return Call("POST", MUX_PATH, _frame_results, {"steps": steps}, step=True, op="step_frame",
                    episode_id=episode_id)

    @staticmethod
    def status(episode_id: str) -> Call[EpisodeStatus]:
        return Call("GET", f"{API_PREFIX}/episodes/{episode_id}", EpisodeStatus.model_validate, op="status",
                    episode_id=episode_id)

    @staticmethod
    def render(episode_id: str) -> Call[str | None]:
        return Call("GET", f"{API_PREFIX}/episodes/{episode_id}/render", lambda d: d["text"], op="render",
                    episode_id=episode_id)

    @staticmethod
    def fork(episode_id: str, n: int) -> Call[list[EpisodeForked]]:
        return Call("POST", MUX_PATH, lambda d: [EpisodeForked.model_validate(e) for e in d["episodes"]],
                    {"op": "fork", "episode_id": episode_id, "n": n, "request_id": _new_id()}, step=True,
                    op="fork", episode_id=episode_id)

    @staticmethod
    def trajectory(episode_id: str) -> Call[dict[str, Any]]:
        return Call("GET", f"{API_PREFIX}/episodes/{episode_id}/trajectory", dict, op="trajectory",
                    episode_id=episode_id)

    @staticmethod
    def close(episode_id: str) -> Call[bool]:
        return Call("POST", MUX_PATH, lambda d: bool(d["closed"]),
                    {"op": "close", "episode_id": episode_id, "request_id": _new_id()}, step=True,
                    op="close", episode_id=episode_id)


@dataclass(frozen=True)
class RetryPolicy:
    """Retries after transport errors and 429s. Safe because every mutating call is idempotent.

    `timeouts`: whether a call that timed out is tried again; a cluster's holder that let a call
    time out is taken for lost at once (its episodes are replayed elsewhere), so that a hung holder
    costs one timeout, not one per try."""

    retries: int = 3
    backoff_s: float = 0.1
    max_wait_s: float = 5.0
    timeouts: bool = True

    def delay(self, attempt: int, outcome: Answer | Exception) -> float | None:
        """Seconds to wait before retrying, or None to stop and report `outcome`."""
        if attempt >= self.retries:
            return None
        if isinstance(outcome, Answer):
            if outcome.status != 429:
                return None
            after = outcome.retry_after
            return min(after if after is not None else self.backoff_s * 2**attempt, self.max_wait_s)
        if isinstance(outcome, httpx.TimeoutException) and not self.timeouts:
            return None
        if isinstance(outcome, httpx.TransportError):
            return min(self.backoff_s * 2**attempt, self.max_wait_s)
        return None


def _settled(call: Call[T], outcome: Answer | Exception) -> T:
    """A call's parsed answer, from the outcome of its last attempt, or the error it raises."""
    if isinstance(outcome, Exception):
        raise outcome
    if outcome.status >= 400:
        raise error_from(outcome.status, outcome.body, outcome.retry_after)
    return call.parse(outcome.body)


def _answer(response: httpx.Response) -> Answer:
    try:
        body = loads(response.content)
    except ValueError:
        body = response.text
    after = response.headers.get("Retry-After", "")
    return Answer(response.status_code, body, float(after) if after.isdigit() else None)


def _pooled_transport(limits: httpx.Limits) -> httpx.AsyncBaseTransport | None:
    try:
        from httpx_aiohttp import AiohttpTransport
    except ImportError:  # httpx's own transport: correct, slower under high concurrency
        return None
    return AiohttpTransport(limits=limits)


def _url(http: httpx.Client | httpx.AsyncClient, path: str) -> str:
    """`path` under the client's base URL, joined as httpx joins them but parsed once instead of
    twice (URL parsing is a good share of httpx's cost per request)."""
    base = str(http.base_url)
    if not base:
        return path
    return base.rstrip("/") + "/" + path.lstrip("/")


def new_client_key() -> str:
    """A client's key (`CLIENT_KEY_HEADER`): 128 random bits, so no other client can guess it."""
    return secrets.token_hex(16)


def own_client_key(given: str | None) -> str:
    """A client's key: `given`, refused with a ValueError where a server would refuse it
    (`agentrl.protocol.check_client_key`), or a new one (`new_client_key`) where none is given."""
    return new_client_key() if given is None else check_client_key(given)


def _headers(token: str | None, client_key: str) -> dict[str, str]:
    headers = {CLIENT_KEY_HEADER: client_key}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _request(call: Call[Any]) -> dict[str, Any]:
    if call.body is None:
        return {}
    return {"content": dumps(call.body), "headers": {"content-type": "application/json"}}


def _holder_retry(retry: RetryPolicy) -> RetryPolicy:
    """A cluster's holder is tried once more after a transport error other than a timeout (a
    connection that dropped between calls), at once, then its episodes are replayed: a wait before
    that retry would only delay the replay of a holder that is gone (by the default policy's 100 ms),
    and a holder that timed out is hung, not gone. A 429 still waits its Retry-After."""
    return dataclasses.replace(retry, retries=min(retry.retries, 1), timeouts=False, backoff_s=0.0)
