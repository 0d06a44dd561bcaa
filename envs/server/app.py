"""The FastAPI app serving agentrl envs: a versioned episode API plus OpenEnv's WebSocket protocol.

Nothing here knows any particular env: envs are built by id through `agentrl.registration`.
Step responses are encoded where the step ran (see `episodes.py`) and sent as raw bytes. The
step endpoints, the hot path of every rollout, are answered by `StepFastPath` straight from ASGI
(the `/v1/ws` socket by `step_socket.StepSocket`); FastAPI still declares the HTTP ones (for the
schema and /docs) and answers whatever the fast path passes on, such as invalid requests, so every
error keeps one shape. Every entry runs its steps through `EpisodeRegistry.run_steps`.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentrl import __version__
from agentrl.core import StepResult
from agentrl.protocol import (
    API_PREFIX,
    MUX_PATH,
    BatchResults,
    BatchStep,
    Closed,
    CreateEpisode,
    EnvList,
    EnvSpec,
    EpisodeCreated,
    EpisodeStatus,
    ErrorBody,
    ErrorCode,
    Health,
    Rendered,
    ResetEpisode,
    StepAction,
    dumps,
    encode_error,
    encode_results,
)
from agentrl.registration import env_package, load_env_class
from agentrl.server import collector
from agentrl.server.call_answers import ApiError
from agentrl.server.config import ServerConfig
from agentrl.server.episodes import EpisodeRegistry
from agentrl.server.forks import Forks, fork_router
from agentrl.server.frame_calls import FrameCalls
from agentrl.server.metrics import Metrics
from agentrl.server.openenv.routes import openenv_router
from agentrl.server.owners import CALLER, Caller, client_key
from agentrl.server.step_socket import StepSocket
from agentrl.server.ui.page import mount_ui
from agentrl.server.ui.watch import watch_router
from agentrl.serving.apps import ErrorHandler, server_app
from agentrl.serving.openapi import allowed_methods

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (400, 401, 404, 409, 413, 422, 429, 503)
}
JSON = "application/json"


def _error_response(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(encode_error(code, message), status, headers=headers, media_type=JSON)


class GuardMiddleware:
    """Bearer-token auth and a request-size limit, in front of everything but `/health`.

    A plain ASGI middleware: it costs a dict lookup per request, where Starlette's
    `BaseHTTPMiddleware` would add a task and a stream copy.
    """

    def __init__(self, app: ASGIApp, token: str | None, max_body_bytes: int, metrics: Metrics,
                 operator_token: str | None = None) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.operator_token = operator_token.encode() if operator_token else None
        self.max_body = max_body_bytes
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] == "/health":
            return await self.app(scope, receive, send)
        given = self._bearer(scope)
        operator = given is not None and self.operator_token is not None \
            and hmac.compare_digest(given, self.operator_token)
        if self.token is not None and not operator and not (given is not None
                                                            and hmac.compare_digest(given, self.token)):
            self.metrics.errors.labels(ErrorCode.UNAUTHORIZED).inc()
            response = _error_response(401, ErrorCode.UNAUTHORIZED, "missing or wrong bearer token",
                                       {"WWW-Authenticate": "Bearer"})
            if scope["type"] == "websocket":
                return await _refuse_socket(scope, send, response)
            return await response(scope, receive, send)
        if scope["type"] == "http":
            for name, value in scope["headers"]:
                if name == b"content-length" and (not value.isdigit() or int(value) > self.max_body):
                    self.metrics.errors.labels(ErrorCode.BODY_TOO_LARGE).inc()
                    response = _error_response(413, ErrorCode.BODY_TOO_LARGE,
                                               f"request body over the limit of {self.max_body} bytes")
                    return await response(scope, receive, send)
        try:
            key = client_key(scope["headers"])
        except ValueError as exc:  # a key is compared whole: one that is not a key is refused, not cut
            self.metrics.errors.labels(ErrorCode.INVALID_REQUEST).inc()
            response = _error_response(400, ErrorCode.INVALID_REQUEST, str(exc))
            if scope["type"] == "websocket":
                return await _refuse_socket(scope, send, response)
            return await response(scope, receive, send)
        # a server with no token authenticates no one (loopback only): every caller operates it, and
        # client keys, which only a token makes worth anything, are recorded but not enforced
        if self.token is None and self.operator_token is None:
            operator = True
        reset = CALLER.set(Caller(key, operator))
        try:
            return await self.app(scope, receive, send)
        finally:
            CALLER.reset(reset)

    @staticmethod
    def _bearer(scope: Scope) -> bytes | None:
        """The token the request bears, in its Authorization header (or, on a WebSocket, the
        `token` query parameter: browsers and OpenEnv's client cannot set headers there)."""
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, given = value.partition(b" ")
                return given.strip() if scheme.lower() == b"bearer" else None
        if scope["type"] == "websocket":
            for part in scope.get("query_string", b"").split(b"&"):
                key, _, given = part.partition(b"=")
                if key == b"token":
                    return given
        return None


async def _refuse_socket(scope: Scope, send: Send, response: Response) -> None:
    """Refuse a WebSocket handshake with `response` (so a client reads the same 401 as over HTTP)
    where the server can answer a handshake with a response, else by closing it."""
    if "websocket.http.response" not in scope.get("extensions", {}):
        return await send({"type": "websocket.close", "code": 1008, "reason": "unauthorized"})
    await send({"type": "websocket.http.response.start", "status": response.status_code,
                "headers": response.raw_headers})
    await send({"type": "websocket.http.response.body", "body": response.body})


_STEP_ONE = re.compile(rf"{API_PREFIX}/episodes/([^/]+)/step")
_STEP_BATCH = f"{API_PREFIX}/step"
_JSON_HEADERS = [(b"content-type", JSON.encode())]


class StepFastPath:
    """`POST /v1/episodes/{id}/step`, `POST /v1/step` and the `/v1/ws` socket without FastAPI's
    routing and dependency machinery, which costs more per request than the step of a light env.

    The body is validated with the same pydantic models in one pass (`model_validate_json`). Any
    request it does not take as is (another content type, a body that fails validation) goes on
    to the FastAPI route with its body replayed, so errors read exactly as on every other route.
    """

    def __init__(self, app: ASGIApp, step_one: Callable[[str, StepAction], Awaitable[bytes]],
                 step_batch: Callable[[BatchStep], Awaitable[bytes]], step_socket: ASGIApp,
                 metrics: Metrics) -> None:
        self.app = app
        self.step_socket = step_socket
        self.step_one = step_one
        self.step_batch = step_batch
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and scope["path"] == MUX_PATH and not scope.get("root_path"):
            return await self.step_socket(scope, receive, send)
        if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
            return await self.app(scope, receive, send)
        path = scope["path"]
        if path == _STEP_BATCH:
            episode_id = None
        else:
            match = _STEP_ONE.fullmatch(path)
            if match is None:
                return await self.app(scope, receive, send)
            episode_id = match.group(1)
        if not _is_json(scope):
            return await self.app(scope, receive, send)
        body = await _read_body(receive)
        if body is None:  # the client went away
            return None
        try:
            req = StepAction.model_validate_json(body) if episode_id is not None \
                else BatchStep.model_validate_json(body)
        except ValidationError:
            return await self.app(scope, _replay(body, receive), send)
        try:
            out = await (self.step_one(episode_id, req) if episode_id is not None  # type: ignore[arg-type]  # a StepAction here
                         else self.step_batch(req))  # type: ignore[arg-type]  # a BatchStep here
        except ApiError as exc:
            self.metrics.errors.labels(exc.code).inc()
            response = _error_response(exc.status, exc.code, exc.message, exc.headers)
            return await response(scope, receive, send)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(out)).encode()), *_JSON_HEADERS]})
        await send({"type": "http.response.body", "body": out})


def _is_json(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.partition(b";")[0].strip().lower() == b"application/json"
    return False


async def _read_body(receive: Receive) -> bytes | None:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed


def _env_spec(env_id: str) -> dict[str, Any]:
    """What a client needs to know about an env, read from a default instance (built in a thread)."""
    package, version = env_package(env_id)
    try:
        cls = load_env_class(env_id)
        env = cls()
    except Exception as exc:  # e.g. its module is not installed here, or it needs Docker
        return {"env_id": env_id, "package": package, "version": version, "available": False,
                "reason": f"{type(exc).__name__}: {exc}"}
    try:
        spec: dict[str, Any] = {"env_id": env_id, "package": package, "version": version}
        for name in ("action_space", "observation_space"):
            space = getattr(env, name)
            spec[name] = {"type": "text", "max_length": int(space.max_length),
                          "min_length": int(space.min_length)}
        tool_specs = getattr(cls, "tool_specs", None)
        spec["tools"] = tool_specs() if callable(tool_specs) else []
        spec["default_options"] = {"max_turns": getattr(env, "max_turns", None)}
        return json.loads(dumps(spec))
    finally:
        env.close()


StepOne = Callable[[str, StepAction], Awaitable[bytes]]
StepMany = Callable[[BatchStep], Awaitable[bytes]]


def create_app(config: ServerConfig | None = None) -> FastAPI:
    """The episode server over `config`, on the skeleton every agentrl server shares
    (`agentrl.serving.apps.server_app`): its routes, its errors in one shape (`_error_handlers`),
    the guard in front of the step fast path, and the page when `config.ui`."""
    config = config or ServerConfig()
    metrics = Metrics()
    registry = EpisodeRegistry(config, metrics)
    metrics.watch_holder(config.resolved_holder(), lambda: registry.live, registry.dispatch.queued)
    step_one, step_many = _step_entries(registry)
    forks = Forks(registry)
    # steps and lifecycle calls over one connection, many per frame (see `agentrl.server.step_socket`)
    calls = FrameCalls(registry, forks, lambda env_id: metrics.episodes_replayed.labels(env_id).inc())
    step_socket = StepSocket(calls.now, calls.many, registry.dispatch.target_s, metrics)
    app = server_app(
        "agentrl",
        version=__version__,
        description="Stateful agentrl episodes over HTTP, one env instance per episode.",
        state={"registry": registry, "metrics": metrics, "config": config},
        lifespan=_lifespan(registry),
        errors=_error_handlers(metrics),
        routers=[
            _service_routes(registry, metrics, config),
            _env_routes(registry),
            _episode_routes(registry, metrics, step_one, step_many),
            openenv_router(registry, config),  # OpenEnv's protocol: agentrl.server.openenv
            watch_router(registry),  # read-only: the episode list and transcripts
            fork_router(forks),  # fork an episode, read its trajectory record
        ],
        middleware=[  # outermost first: the guard sees every request before the fast path takes steps
            Middleware(GuardMiddleware, token=config.resolved_token(), max_body_bytes=config.max_body_bytes,
                       metrics=metrics, operator_token=config.resolved_operator_token()),
            Middleware(StepFastPath, step_one=step_one, step_batch=step_many, step_socket=step_socket,
                       metrics=metrics),
        ],
    )
    if config.ui:  # after the guard: the page's sign-in sits in front of it
        mount_ui(app, registry, config.resolved_token(), config.resolved_operator_token())
    return app


def _lifespan(registry: EpisodeRegistry) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with collector.serving():  # no collection walks the live episodes while serving
            registry.start()
            yield
            await registry.shutdown()

    return lifespan


def _error_handlers(metrics: Metrics) -> dict[type[Exception], ErrorHandler]:
    """Every error as an `ErrorBody` with its code, counted: the server's own, a request that fails
    validation, and Starlette's (an unknown route, a wrong method)."""

    async def api_error(request: Request, exc: ApiError) -> Response:
        metrics.errors.labels(exc.code).inc()
        return _error_response(exc.status, exc.code, exc.message, exc.headers)

    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        metrics.errors.labels(ErrorCode.INVALID_REQUEST).inc()
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
            problems.append(f"{where}: {err.get('msg', 'invalid')}")
        return _error_response(422, ErrorCode.INVALID_REQUEST, "; ".join(problems) or "invalid request")

    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = ErrorCode.NOT_FOUND if exc.status_code == 404 else ErrorCode.INVALID_REQUEST
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405:  # every method of the path, not only the route Starlette tried
            headers = {**(headers or {}), "Allow": allowed_methods(request.app.router.routes, request.scope)}
        return _error_response(exc.status_code, code, str(exc.detail), headers)

    return {ApiError: api_error, RequestValidationError: invalid, StarletteHTTPException: http_error}


def _service_routes(registry: EpisodeRegistry, metrics: Metrics, config: ServerConfig) -> APIRouter:
    router = APIRouter()

    @router.get("/health", response_model=Health)
    async def health() -> dict[str, Any]:
        status = "shutting_down" if registry.shutting_down else "healthy"
        return {"status": status, "live_episodes": registry.live, "max_episodes": config.max_episodes}

    @router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=metrics.content_type)

    return router


def _env_routes(registry: EpisodeRegistry) -> APIRouter:
    """The envs served and each one's spec, read once per env (`_env_spec`)."""
    router = APIRouter()
    spec_cache: dict[str, dict[str, Any]] = {}

    async def spec_of(env_id: str) -> dict[str, Any]:
        registry.check_env_id(env_id)
        if env_id not in spec_cache:
            spec = await registry.dispatch.run("spec", _env_spec, env_id)
            spec_cache[env_id] = spec
        return spec_cache[env_id]

    @router.get(f"{API_PREFIX}/envs", response_model=EnvList)
    async def list_envs() -> dict[str, Any]:
        return {"envs": [await spec_of(env_id) for env_id in registry.env_ids]}

    @router.get(f"{API_PREFIX}/envs/{{env_id:path}}", response_model=EnvSpec, responses=ERRORS)
    async def get_env(env_id: str) -> dict[str, Any]:
        return await spec_of(env_id)

    return router


def _step_entries(registry: EpisodeRegistry) -> tuple[StepOne, StepMany]:
    """`POST .../step` and `POST /v1/step` as bytes: the same for their routes and for the fast path."""

    async def step_one(episode_id: str, req: StepAction) -> bytes:
        _, body = await registry.step(episode_id, req.action, req.request_id)
        return body

    async def step_many(req: BatchStep) -> bytes:
        return encode_results(await registry.step_many(req.steps))

    return step_one, step_many


def _episode_routes(registry: EpisodeRegistry, metrics: Metrics, step_one: StepOne,
                    step_many: StepMany) -> APIRouter:
    router = APIRouter()

    @router.post(f"{API_PREFIX}/episodes", response_model=EpisodeCreated, status_code=201, responses=ERRORS)
    async def create_episode(req: CreateEpisode) -> Response:
        _, answer = await registry.create(req.env_id, req.seed, req.options, req.env_kwargs, req.request_id)
        if req.replay_of is not None:  # a cluster client lost this episode's server and replays it here
            metrics.episodes_replayed.labels(req.env_id).inc()
        return Response(dumps(answer), 201, media_type=JSON)

    @router.get(f"{API_PREFIX}/episodes/{{episode_id}}", response_model=EpisodeStatus, responses=ERRORS)
    async def get_episode(episode_id: str) -> dict[str, Any]:
        return registry.get(episode_id).status()

    @router.delete(f"{API_PREFIX}/episodes/{{episode_id}}", response_model=Closed, responses=ERRORS)
    async def delete_episode(episode_id: str) -> dict[str, Any]:
        await registry.close_once(episode_id)
        return {"episode_id": episode_id, "closed": True}

    @router.post(f"{API_PREFIX}/episodes/{{episode_id}}/step", response_model=StepResult, responses=ERRORS)
    async def step_episode(episode_id: str, req: StepAction) -> Response:
        return Response(await step_one(episode_id, req), media_type=JSON)

    @router.post(f"{API_PREFIX}/episodes/{{episode_id}}/reset", response_model=EpisodeCreated,
                 responses=ERRORS)
    async def reset_episode(episode_id: str, req: ResetEpisode) -> Response:
        """Start over on the same env instance, as `env.reset()` does locally (its RNG continues)."""
        ep = registry.get(episode_id)
        first = await registry.reset(ep, req.seed, req.options, req.request_id)
        return Response(dumps(ep.answer(first)), media_type=JSON)

    @router.get(f"{API_PREFIX}/episodes/{{episode_id}}/render", response_model=Rendered, responses=ERRORS)
    async def render_episode(episode_id: str) -> dict[str, Any]:
        return {"text": await registry.render(episode_id)}

    @router.post(f"{API_PREFIX}/step", response_model=BatchResults, responses=ERRORS)
    async def step_batch(req: BatchStep) -> Response:
        return Response(await step_many(req), media_type=JSON)

    return router
