"""`RemoteEnv` (a Gymnasium env), `EnvClient` (sync) and `AsyncEnvClient`: one server or a cluster.

Both clients share one core (`agentrl.client.wire`: each endpoint as a `Call`, one retry policy, one
reading of a call's last outcome) and differ only in how they wait: the sync client drives it with
blocking I/O, the async client with `await`. An episode's whole life (create, reset, steps, close, fork)
travels over a persistent WebSocket (`agentrl.client.steps`), every other call over HTTP (httpx). Every
call that changes an episode carries a `request_id`, so a retry after a lost answer never creates,
steps or closes twice. The wire format, the typed errors included, is `agentrl.protocol`'s; nothing
here imports the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import httpx

from agentrl.client.steps import AsyncSteps, SyncSteps
from agentrl.client.wire import (
    Call,
    RetryPolicy,
    T,
    _answer,
    _headers,
    _holder_retry,
    _pooled_transport,
    _request,
    _settled,
    _url,
    _Wire,
    own_client_key,
)
from agentrl.core import StepResult, TextSpace
from agentrl.protocol import (
    Answer,
    CapacityError,
    EnvSpec,
    EpisodeCreated,
    EpisodeEndedError,
    EpisodeForked,
    EpisodeOverError,
    EpisodeStatus,
    ErrorCode,
    InvalidRequestError,
    RemoteEnvError,
    ServerError,
    ShuttingDownError,
    UnauthorizedError,
    UnknownEnvError,
    UnknownEpisodeError,
    error_from,
    is_cluster_url,
)

MAX_FRAME_BYTES = 64 * 2**20  # the largest reply the client accepts on its step channel
__all__ = [  # the errors are the protocol's, raised here
    "AsyncEnvClient", "CapacityError", "EnvClient", "EpisodeEndedError", "EpisodeOverError",
    "InvalidRequestError", "RemoteEnv", "RemoteEnvError", "RetryPolicy", "ServerError", "ShuttingDownError",
    "StepResult", "UnauthorizedError", "UnknownEnvError", "UnknownEpisodeError", "error_from",
]


class EnvClient(contextlib.AbstractContextManager["EnvClient"]):
    """Synchronous client: episodes' calls over a WebSocket per thread, the rest over one pooled
    `httpx.Client`.

    Safe to share between threads: each thread stepping at the same time gets a connection.
    `base_url` is one server's URL, or a cluster's discovery URL (`http://host:port/v1/cluster`):
    then every call goes to the holder of its episode and a lost holder's episodes are replayed
    (`agentrl.client.cluster`; `cluster.stats` counts the replays). Its endpoint methods are
    `AsyncEnvClient`'s, method by method, over the same `_Wire` calls.
    """

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 60.0,
                 retry: RetryPolicy | None = None, http: httpx.Client | None = None,
                 client_key: str | None = None):
        self.retry = retry or RetryPolicy()
        self.client_key = own_client_key(client_key)
        self.cluster = None
        if is_cluster_url(base_url):  # imported here: only a cluster's client needs its routing
            from agentrl.client.cluster_routes import SyncRoutes

            holder_retry = _holder_retry(self.retry)
            self.cluster = SyncRoutes(base_url, lambda url: EnvClient(
                url, token=token, timeout=timeout, retry=holder_retry, client_key=self.client_key))
            return
        headers = _headers(token, self.client_key)
        self.http = http or httpx.Client(base_url=base_url, timeout=timeout, headers=headers)
        self.steps = SyncSteps(base_url, headers, timeout, MAX_FRAME_BYTES)

    def health(self) -> dict[str, Any]:
        return self._run(_Wire.health())

    def list_envs(self) -> list[EnvSpec]:
        """Every served env with its spaces, tool specs and defaults."""
        return self._run(_Wire.envs())

    def env_spec(self, env_id: str) -> EnvSpec:
        return self._run(_Wire.env(env_id))

    def create_episode(self, env_id: str, *, seed: int | None = None, options: dict[str, Any] | None = None,
                       env_kwargs: dict[str, Any] | None = None) -> EpisodeCreated:
        """A new episode of `env_id`: its id, first observation and info."""
        return self._run(_Wire.create(env_id, seed, options, env_kwargs))

    def reset_episode(self, episode_id: str, *, seed: int | None = None,
                      options: dict[str, Any] | None = None) -> EpisodeCreated:
        """Reset the episode's env in place, as `env.reset()` does locally."""
        return self._run(_Wire.reset(episode_id, seed, options))

    def step(self, episode_id: str, action: str, *, request_id: str | None = None) -> StepResult:
        """One step. Concurrent steps of an `AsyncEnvClient` travel together, a frame at a time,
        over its one connection."""
        return self._run(_Wire.step(episode_id, action, request_id))

    def step_batch(self, items: Sequence[tuple[str, str]]) -> list[StepResult | ServerError]:
        """Step many episodes in one request; per item a `StepResult` or the `ServerError` it got."""
        return self._run(_Wire.step_batch(items))

    def episode_status(self, episode_id: str) -> EpisodeStatus:
        return self._run(_Wire.status(episode_id))

    def render(self, episode_id: str) -> str | None:
        return self._run(_Wire.render(episode_id))

    def close_episode(self, episode_id: str) -> bool:
        return self._run(_Wire.close(episode_id))

    def fork_episode(self, episode_id: str, n: int = 1) -> list[EpisodeForked]:
        """n new episodes in this one's state, continuing exactly as it would, each with the latest
        observation and info. All are made, or none."""
        return self._run(_Wire.fork(episode_id, n))

    def trajectory(self, episode_id: str) -> dict[str, Any]:
        """The episode's trajectory record (`agentrl.trajectory/1`), its forks as children."""
        return self._run(_Wire.trajectory(episode_id))

    def _run(self, call: Call[T]) -> T:
        if self.cluster is not None:  # every call of a cluster's client goes through its router
            return self.cluster.run(call)
        attempt, outcome = 0, self._send(call)
        while (wait := self.retry.delay(attempt, outcome)) is not None:  # retried as the policy says
            time.sleep(wait)
            attempt, outcome = attempt + 1, self._send(call)
        return _settled(call, outcome)

    def _send(self, call: Call[Any]) -> Answer | Exception:
        try:
            if call.step and "steps" in call.body:  # type: ignore[operator]  # a step call has a body
                return Answer(200, self.steps.send_frame(call.body["steps"]), None)  # type: ignore[index]  # as above
            if call.step:
                return self.steps.send(call.body)  # type: ignore[arg-type]  # a step call has a body
            return _answer(self.http.request(call.method, _url(self.http, call.path), **_request(call)))
        except httpx.TransportError as exc:
            return exc

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.close()
            return
        self.steps.close()
        self.http.close()

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncEnvClient(contextlib.AbstractAsyncContextManager["AsyncEnvClient"]):
    """Asynchronous client for rollout workers: one coroutine per episode is the intended use.

    Episodes' calls (create, reset, step, close, fork) travel over one WebSocket, coalesced (see
    `agentrl.client.steps`); other calls go over
    one pooled `httpx.AsyncClient`, through aiohttp's connection pool when `httpx-aiohttp` is
    installed (httpx's own pool slows down as busy connections grow, encode/httpx#3215).
    Use one client per event loop. `base_url` is one server's URL or a cluster's discovery URL,
    as for `EnvClient`, whose endpoint methods these are, as coroutines.
    """

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 60.0,
                 retry: RetryPolicy | None = None, max_connections: int = 256,
                 http: httpx.AsyncClient | None = None, client_key: str | None = None):
        self.retry = retry or RetryPolicy()
        self.client_key = own_client_key(client_key)
        self.cluster = None
        if is_cluster_url(base_url):  # imported here: only a cluster's client needs its routing
            from agentrl.client.cluster_routes import AsyncRoutes

            holder_retry = _holder_retry(self.retry)
            self.cluster = AsyncRoutes(base_url, lambda url: AsyncEnvClient(
                url, token=token, timeout=timeout, retry=holder_retry, max_connections=max_connections,
                client_key=self.client_key))
            return
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        headers = _headers(token, self.client_key)
        self.http = http or httpx.AsyncClient(base_url=base_url, timeout=timeout, headers=headers,
                                              limits=limits, transport=_pooled_transport(limits))
        self.steps = AsyncSteps(base_url, headers, timeout, MAX_FRAME_BYTES)

    async def health(self) -> dict[str, Any]:
        return await self._run(_Wire.health())

    async def list_envs(self) -> list[EnvSpec]:
        """Every served env with its spaces, tool specs and defaults."""
        return await self._run(_Wire.envs())

    async def env_spec(self, env_id: str) -> EnvSpec:
        return await self._run(_Wire.env(env_id))

    async def create_episode(self, env_id: str, *, seed: int | None = None,
                             options: dict[str, Any] | None = None,
                             env_kwargs: dict[str, Any] | None = None) -> EpisodeCreated:
        """A new episode of `env_id`: its id, first observation and info."""
        return await self._run(_Wire.create(env_id, seed, options, env_kwargs))

    async def reset_episode(self, episode_id: str, *, seed: int | None = None,
                            options: dict[str, Any] | None = None) -> EpisodeCreated:
        """Reset the episode's env in place, as `env.reset()` does locally."""
        return await self._run(_Wire.reset(episode_id, seed, options))

    async def step(self, episode_id: str, action: str, *, request_id: str | None = None) -> StepResult:
        """One step. Concurrent steps of an `AsyncEnvClient` travel together, a frame at a time,
        over its one connection."""
        return await self._run(_Wire.step(episode_id, action, request_id))

    async def step_batch(self, items: Sequence[tuple[str, str]]) -> list[StepResult | ServerError]:
        """Step many episodes in one request; per item a `StepResult` or the `ServerError` it got."""
        return await self._run(_Wire.step_batch(items))

    async def episode_status(self, episode_id: str) -> EpisodeStatus:
        return await self._run(_Wire.status(episode_id))

    async def render(self, episode_id: str) -> str | None:
        return await self._run(_Wire.render(episode_id))

    async def close_episode(self, episode_id: str) -> bool:
        return await self._run(_Wire.close(episode_id))

    async def fork_episode(self, episode_id: str, n: int = 1) -> list[EpisodeForked]:
        """n new episodes in this one's state, continuing exactly as it would, each with the latest
        observation and info. All are made, or none."""
        return await self._run(_Wire.fork(episode_id, n))

    async def trajectory(self, episode_id: str) -> dict[str, Any]:
        """The episode's trajectory record (`agentrl.trajectory/1`), its forks as children."""
        return await self._run(_Wire.trajectory(episode_id))

    async def _run(self, call: Call[T]) -> T:
        if self.cluster is not None:  # every call of a cluster's client goes through its router
            return await self.cluster.run(call)
        attempt, outcome = 0, await self._send(call)
        while (wait := self.retry.delay(attempt, outcome)) is not None:
            await asyncio.sleep(wait)
            attempt, outcome = attempt + 1, await self._send(call)
        return _settled(call, outcome)

    async def _send(self, call: Call[Any]) -> Answer | Exception:
        try:
            if call.step and "steps" in call.body:  # type: ignore[operator]  # a step call has a body
                return Answer(200, await self.steps.send_frame(call.body["steps"]), None)  # type: ignore[index]  # as above
            if call.step:
                return await self.steps.send(call.body)  # type: ignore[arg-type]  # a step call has a body
            response = await self.http.request(call.method, _url(self.http, call.path), **_request(call))
            return _answer(response)
        except httpx.TransportError as exc:
            return exc

    async def aclose(self) -> None:
        if self.cluster is not None:
            await self.cluster.aclose()
            return
        await self.steps.aclose()
        await self.http.aclose()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# --- Gymnasium -----------------------------------------------------------------------------------
class RemoteEnv(gym.Env[str, str]):
    """An agentrl env running on an agentrl server, behind the ordinary Gymnasium API.

    `gym.make("agentrl/Flights-v0", base_url="http://127.0.0.1:8000")` returns one. It holds one
    server-side episode (one env instance) across resets, so seeding behaves as locally: the same
    seed gives the same observations, and `reset()` without a seed continues the env's RNG.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, env_id: str, *, base_url: str, token: str | None = None, timeout: float = 60.0,
                 render_mode: str | None = None, client: EnvClient | None = None, **env_kwargs: Any):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}")
        self.env_id = env_id
        self.render_mode = render_mode
        self._owns_client = client is None
        self.client = client or EnvClient(base_url, token=token, timeout=timeout)
        self._base_url, self._token, self._timeout = base_url, token, timeout
        self.env_kwargs = dict(env_kwargs, **({"render_mode": render_mode} if render_mode else {}))
        spec = self.client.env_spec(env_id)
        if not spec.available or spec.action_space is None or spec.observation_space is None:
            raise UnknownEnvError(503, "env_unavailable", f"{env_id} is not available: {spec.reason}")
        self.action_space = TextSpace(spec.action_space.max_length)
        self.observation_space = TextSpace(spec.observation_space.max_length)
        self.tools = spec.tools
        self.episode_id: str | None = None

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        created = None
        if self.episode_id is not None:
            try:
                created = self.client.reset_episode(self.episode_id, seed=seed, options=options)
            except UnknownEpisodeError:  # expired on the server: start a fresh env
                self.episode_id = None
        if created is None:
            created = self.client.create_episode(self.env_id, seed=seed, options=options,
                                                 env_kwargs=self.env_kwargs)
            self.episode_id = created.episode_id
        # the episode's own tools: env kwargs (a Flights granularity) may change the default set
        self.tools = created.info.get("tools", self.tools)
        return created.observation, created.info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.episode_id is None:
            raise EpisodeOverError(409, ErrorCode.EPISODE_OVER, "call reset() before step()")
        return self.client.step(self.episode_id, action).as_tuple()

    def fork(self, n: int = 1) -> list[RemoteEnv]:
        """n envs in this one's state, each owning its own server-side episode (a fork); they use
        this env's client, or a client of their own where this env owns its client."""
        if self.episode_id is None:
            raise EpisodeOverError(409, ErrorCode.EPISODE_OVER, "call reset() before fork()")
        return [self._child(made.episode_id) for made in self.client.fork_episode(self.episode_id, n)]

    def trajectory(self) -> dict[str, Any]:
        """The episode's `agentrl.trajectory/1` record, forks included (see `TextEnv.trajectory`)."""
        if self.episode_id is None:
            raise EpisodeOverError(409, ErrorCode.EPISODE_OVER, "call reset() before trajectory()")
        return self.client.trajectory(self.episode_id)

    def _child(self, episode_id: str) -> RemoteEnv:
        child = copy.copy(self)
        child._np_random = None  # its own generator, as a fresh env has
        if self._owns_client:
            child.client = EnvClient(self._base_url, token=self._token, timeout=self._timeout,
                                     client_key=self.client.client_key)  # the fork is this client's
        child.episode_id = episode_id
        return child

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self.episode_id is None:
            return None
        return self.client.render(self.episode_id)

    def close(self) -> None:
        if self.episode_id is not None:
            with contextlib.suppress(ServerError, httpx.HTTPError):  # expired, or the server stopped
                self.client.close_episode(self.episode_id)
            self.episode_id = None
        if self._owns_client:
            self.client.close()
        super().close()
