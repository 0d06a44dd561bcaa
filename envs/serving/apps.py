"""What every agentrl HTTP server's app is made of, written once: its Prometheus metrics in a registry
of its own (`ServerMetrics`) and the FastAPI app around the server's own pieces (`server_app`).

The episode server, the sandbox server and the retrievers' server differ in their routes, in the
shape of their errors and in what they keep on `app.state`, not in how an app is put together; each
`create_app` builds its pieces and hands them here. A registry of one's own, not prometheus_client's
global one, lets several apps live in one process (the tests, holders started in one process), each
scraped apart.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.middleware import Middleware

__all__ = ["ErrorHandler", "ServerMetrics", "server_app"]

ErrorHandler = Callable[[Request, Any], Coroutine[Any, Any, Response]]
"""Answers an error raised by a route in the server's own error shape."""


class ServerMetrics:
    """A server's Prometheus metrics: each server's own subclass registers its metrics in
    `self.registry`, and its `GET /metrics` answers `render()` as `content_type`."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()

    def render(self) -> bytes:
        return generate_latest(self.registry)


def server_app(
    title: str,
    *,
    version: str = "0.1.0",  # FastAPI's own default, for a server without a version of its own
    state: Mapping[str, Any],
    routers: Sequence[APIRouter] = (),
    errors: Mapping[type[Exception], ErrorHandler] | None = None,
    middleware: Sequence[Middleware] = (),
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
    description: str = "",
    responses: dict[int | str, dict[str, Any]] | None = None,
) -> FastAPI:
    """A server's app: `state` set on `app.state`, `routers` included in their order, `errors`
    (an exception class and its handler) answering every error in the server's shape, `middleware`
    outermost first (so a guard listed first sees each request before the rest), `lifespan` run
    around serving, `responses` (the error answers) declared on every route of the schema."""
    handlers: dict[int | type[Exception], ErrorHandler] = {kind: on for kind, on in (errors or {}).items()}
    app = FastAPI(title=title, version=version, description=description, lifespan=lifespan,
                  responses=responses, exception_handlers=handlers, middleware=list(middleware))
    for name, value in state.items():
        setattr(app.state, name, value)
    for router in routers:
        app.include_router(router)
    return app
