"""`/v1/ws`: many steps over one persistent WebSocket, as the clients send them.

A client keeps one connection and sends a frame of steps whenever it has some (the async client
puts every step its coroutines ask for in the same loop iteration into one frame), so the server
reads one message for many steps, and the HTTP request of each step (its head, its routing, its
response) is gone. Frames are answered as soon as their steps are done, each in a task of its
own, so a slow env in one frame never holds up the others; a connection may have at most
`MAX_FRAMES_IN_FLIGHT` frames in flight before the server stops reading from it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from pydantic import ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect

from agentrl.server.metrics import Metrics
from agentrl.server.wire import BatchItem, ErrorCode, StepFrame, dumps, loads

MAX_FRAMES_IN_FLIGHT = 64
StepMany = Callable[[Sequence[BatchItem]], Awaitable[list[bytes]]]


async def serve_steps(websocket: WebSocket, step_many: StepMany, metrics: Metrics) -> None:
    await websocket.accept()
    send_lock = asyncio.Lock()
    slots = asyncio.Semaphore(MAX_FRAMES_IN_FLIGHT)
    running: set[asyncio.Task] = set()

    async def answer(data: bytes | str) -> None:
        try:
            try:
                frame = StepFrame.model_validate_json(data)
            except ValidationError as exc:
                metrics.errors.labels(ErrorCode.INVALID_REQUEST).inc()
                reply = _refusal(data, exc)
            else:
                metrics.frame_steps.observe(len(frame.steps))
                parts = await step_many(frame.steps)
                reply = b'{"id":%d,"results":[%s]}' % (frame.id, b",".join(parts))
            async with send_lock:
                await websocket.send_bytes(reply)
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass  # the client went away; its steps are done and a retry gets their results
        finally:
            slots.release()

    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            data = message.get("bytes")
            if data is None:
                data = message.get("text") or ""
            await slots.acquire()
            task = asyncio.get_running_loop().create_task(answer(data))
            running.add(task)
            task.add_done_callback(running.discard)
    except WebSocketDisconnect:
        pass
    if running:  # let steps under way finish, so that their results are there for a retry
        await asyncio.gather(*running, return_exceptions=True)


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
