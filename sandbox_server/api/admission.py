"""What a request may hold while it waits and while it runs: bounded by the operator, not the caller.

A JSON body is read only once its call has its turn (a queued call holds nothing but its place), up
to `max_json_bytes`; a call that carries or may answer more than `LIGHT_BYTES` also needs one of a
few "heavy" slots, held until its answer has been sent. So the server's memory is at most about
`heavy_calls` x (what one heavy call holds) + (calls running) x (what a light call holds), whatever
the requests carry.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import anyio
from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.types import Receive, Scope, Send

from agentrl.sandbox_server.wire.errors import TooLarge

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
LIGHT_BYTES = 1 << 20  # a body or an output cap up to this runs without a heavy slot


async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` in a worker thread of its own limiter: the caller's lane or limiter bounds it."""
    return await anyio.to_thread.run_sync(lambda: fn(*args), limiter=anyio.CapacityLimiter(1))


def declared_length(request: Request) -> int | None:
    value = request.headers.get("content-length", "")
    return int(value) if value.isdigit() else None


def parse(model: type[M], body: bytes | bytearray) -> M | RequestValidationError:
    """`body` as `model`, or the 422 to raise, as FastAPI would answer it. The error is returned, not
    raised: raised from a worker thread, it came back in a reference cycle (with the frames that held
    the body and its parsed input) that only the garbage collector broke, many MB per refused body."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False, include_input=False)
    return RequestValidationError(errors)


class Admission:
    """The body limit and the heavy slots of one server."""

    def __init__(self, *, max_json_bytes: int, max_output_bytes: int, heavy_calls: int):
        self.max_json_bytes = max_json_bytes
        self.max_output_bytes = max_output_bytes
        self.heavy = anyio.Semaphore(heavy_calls)

    def too_large(self, what: str) -> TooLarge:
        return TooLarge(
            f"{what} over this server's limit of {self.max_json_bytes} bytes for a JSON request "
            "(--max-json-mb); stdin, code and files travel in it: send big inputs as files (PUT .../files)"
        )

    async def read(self, request: Request, model: type[M]) -> M:
        """The request's JSON body as `model`: over the limit is a 413 (by its declared length or as
        it streams in), a body that does not parse a 422 as FastAPI would answer it."""
        declared = declared_length(request)
        if declared is not None and declared > self.max_json_bytes:
            raise self.too_large(f"a request body of {declared} bytes is")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self.max_json_bytes:
                raise self.too_large("the request body is")
        if len(body) <= LIGHT_BYTES:
            parsed = parse(model, body)
        else:  # a big body (held by a heavy slot, so few at once) is parsed, its base64 decoded, in a
            # worker thread: the event loop goes on serving every other call meanwhile
            parsed = await in_thread(partial(parse, model, body))
        del body
        if isinstance(parsed, RequestValidationError):
            raise parsed
        return parsed

    def check_output(self, max_output_bytes: int) -> None:
        if max_output_bytes > self.max_output_bytes:
            raise TooLarge(
                f"max_output_bytes={max_output_bytes} is over this server's limit of "
                f"{self.max_output_bytes} (--max-output-mb)"
            )

    async def slot(self, heavy: bool) -> Callable[[], None]:
        """A heavy slot if `heavy` (waiting for one), and the function that gives it back."""
        if not heavy:
            return lambda: None
        await self.heavy.acquire()
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.heavy.release()

        return release


class HeldResponse(Response):
    """A response that gives back what its call held (a heavy slot) once it has been sent, or failed to."""

    def __init__(self, content: bytes | str, release: Callable[[], None], media_type: str):
        super().__init__(content, media_type=media_type)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()
