"""ASGI middleware bounding request bodies: over the limit is a 413 before it is read into memory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.responses import JSONResponse


class _TooLarge(Exception):
    pass


class BodyLimit:
    """Refuse request bodies over `max_bytes` (413), by their declared length or as they stream in."""

    def __init__(self, app: Any, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(receive, send)
            return
        seen = 0

        async def limited_receive() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                raise _TooLarge
            return message

        try:
            await self.app(scope, limited_receive, send)
        except _TooLarge:
            await self._refuse(receive, send)

    async def _refuse(self, receive: Callable, send: Callable) -> None:
        response = JSONResponse(
            {"detail": f"request body over the limit of {self.max_bytes} bytes", "kind": "too_large"}, 413
        )
        await response({"type": "http"}, receive, send)  # it answers without reading
