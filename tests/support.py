"""What tests of every area share: the skip-or-fail rule for missing engines, and loopback ports."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    from agentrl.serving.runner import ServerThread


def unavailable(reason: str) -> NoReturn:
    """Skip a test whose engine (Docker, Java, a model package) is missing, but fail under CI.

    Locally a missing engine is a machine without it; in CI (`CI=true`) it is a broken setup, and a
    skip there would hide it.
    """
    if os.environ.get("CI") == "true":
        pytest.fail(f"required under CI=true but unavailable: {reason}")
    pytest.skip(reason)


def step_actions(env: Any, actions: list[str]) -> tuple[float, dict[str, Any]]:
    """Step a reset episode with `actions` until it ends (or they run out): its last reward and info."""
    reward, info = 0.0, {}
    for action in actions:
        _, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    return reward, info


def free_port() -> int:
    """A free TCP port on 127.0.0.1: tests only ever listen on and talk to loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers_after_idling(url: str, path: str) -> bool:
    """Whether one keep-alive connection to `url` still answers `GET path` after idling a second
    longer than an httpx client keeps a pooled connection: a server that closed it first could
    have lost a client's request in flight (`agentrl.serving.runner`)."""
    import http.client
    from urllib.parse import urlsplit

    import httpx

    address = urlsplit(url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
    try:
        connection.request("GET", path)
        first = connection.getresponse()
        first.read()
        assert first.status == 200, first.status
        used = connection.sock.getsockname()
        time.sleep(httpx.Limits().keepalive_expiry + 1.0)
        try:
            connection.request("GET", path)
            again = connection.getresponse()
            again.read()
        except (http.client.HTTPException, ConnectionError):
            return False
        return again.status == 200 and connection.sock.getsockname() == used
    finally:
        connection.close()


class AppServer:
    """uvicorn serving an ASGI app on 127.0.0.1 in a daemon thread of the test process.

    Real HTTP on loopback without a second process; `app` and `token` stay at hand for the tests.
    """

    def __init__(self, app: Any, token: str | None = None) -> None:
        self.app = app
        self.token = token
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.served: ServerThread | None = None

    def __enter__(self) -> AppServer:
        from agentrl.serving.runner import ServerThread, uvicorn_config

        self.served = ServerThread(uvicorn_config(self.app, host="127.0.0.1", port=self.port),
                                   "the test server", startup_timeout_s=30)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.served is not None:
            self.served.stop(timeout_s=30)


def chat_app(requests: list[dict[str, Any]], answer: Callable[[dict[str, Any]], str]) -> Any:
    """A scripted OpenAI-compatible `POST /v1/chat/completions` (a FastAPI app for `AppServer`) whose
    reply text is `answer(body)`; every request body is kept in `requests`, in order."""
    from fastapi import FastAPI

    app = FastAPI()
    lock = threading.Lock()

    @app.post("/v1/chat/completions")
    def complete(body: dict) -> dict:
        with lock:
            requests.append(body)
        text = answer(body)
        return {"id": "x", "object": "chat.completion", "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}]}

    return app
