"""`/v1/ws`: many steps over one persistent WebSocket, as the clients send them.

A client keeps one connection and sends a frame of steps whenever it has some (the async client
puts every step its coroutines ask for in the same loop iteration into one frame), so the server
reads one message for many steps, and the HTTP request of each step (its head, its routing, its
response) is gone.

Per frame the work is kept to what the steps need. The connection is served as raw ASGI (no
framework wrapper per message). A frame whose steps can all run at once on the event loop
(`EpisodeRegistry.step_now`: a light env, an idle episode) is answered right where it was read,
without a task, within one time slice (`dispatch.target_s`). What is left of a frame after its
slice, or from its first step that cannot run at once, goes to a task of its own
(`EpisodeRegistry.step_many`, which runs it a slice per loop iteration), so a slow env in one
frame never holds up the others, and the frames of many connections take turns on the loop. A
connection may have at most `MAX_FRAMES_IN_FLIGHT` frames in tasks before the server stops
reading from it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

from agentrl.server.metrics import Metrics
from agentrl.server.wire import BatchItem, ErrorCode, StepFrame, dumps, loads

MAX_FRAMES_IN_FLIGHT = 64
StepNow = Callable[[BatchItem], "bytes | None"]
StepMany = Callable[[Sequence[BatchItem]], Awaitable[list[bytes]]]


class StepSocket:
    """The `/v1/ws` endpoint, an ASGI app: `step_now` and `step_many` are the registry's."""

    def __init__(self, step_now: StepNow, step_many: StepMany, slice_s: float, metrics: Metrics) -> None:
        self.step_now = step_now
        self.step_many = step_many
        self.slice_s = slice_s
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        slots = asyncio.Semaphore(MAX_FRAMES_IN_FLIGHT)
        running: set[asyncio.Task] = set()
        loop = asyncio.get_running_loop()
        try:
            while True:
                message = await receive()
                if message["type"] != "websocket.receive":
                    break  # websocket.disconnect
                data = message.get("bytes")
                if data is None:
                    data = message.get("text") or ""
                try:
                    frame = StepFrame.model_validate_json(data)
                except ValidationError as exc:
                    self.metrics.errors.labels(ErrorCode.INVALID_REQUEST).inc()
                    await send({"type": "websocket.send", "bytes": _refusal(data, exc)})
                    continue
                steps = frame.steps
                self.metrics.frame_steps.observe(len(steps))
                parts = self._now(steps)
                if len(parts) == len(steps):
                    await send({"type": "websocket.send", "bytes": _reply(frame.id, parts)})
                    continue
                await slots.acquire()
                task = loop.create_task(self._answer(send, frame.id, parts, steps[len(parts):], slots))
                running.add(task)
                task.add_done_callback(running.discard)
        except OSError:  # uvicorn's ClientDisconnected: the client went away mid-send
            pass
        if running:  # let steps under way finish, so that their results are there for a retry
            await asyncio.gather(*running, return_exceptions=True)

    def _now(self, steps: Sequence[BatchItem]) -> list[bytes]:
        """The answers of the frame's first steps, as long as each can run at once and the time
        slice lasts."""
        parts: list[bytes] = []
        slice_end = time.perf_counter() + self.slice_s
        for item in steps:
            part = self.step_now(item)
            if part is None:
                break
            parts.append(part)
            if time.perf_counter() > slice_end:
                break
        return parts

    async def _answer(self, send: Send, frame_id: int, parts: list[bytes], rest: Sequence[BatchItem],
                      slots: asyncio.Semaphore) -> None:
        try:
            parts += await self.step_many(rest)
            await send({"type": "websocket.send", "bytes": _reply(frame_id, parts)})
        except OSError:
            pass  # the client went away; its steps are done and a retry gets their results
        finally:
            slots.release()


def _reply(frame_id: int, parts: list[bytes]) -> bytes:
    return b'{"id":%d,"results":[%s]}' % (frame_id, b",".join(parts))


def _refusal(data: bytes | str, exc: ValidationError) -> bytes:
    """The error reply to a frame that is not a `StepFrame`, with its id when one can be read."""
    try:
        raw = loads(data)
        frame_id = raw.get("id") if isinstance(raw, dict) else None
    except ValueError:
        frame_id = None
    if not isinstance(frame_id, int) or isinstance(frame_id, bool):
        frame_id = None
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'frame'}: {e['msg']}" for e in exc.errors())
    return dumps({"id": frame_id, "status": 422,
                  "error": {"error": ErrorCode.INVALID_REQUEST, "message": problems or "invalid frame"}})
