"""`/v1/ws`: many steps, creates, resets and closes over one persistent WebSocket, as the clients
send them.

A client keeps one connection and sends a frame of steps whenever it has some (the async client
puts every step its coroutines ask for in the same loop iteration into one frame), so the server
reads one message for many steps, and the HTTP request of each step (its head, its routing, its
response) is gone.

Per frame the work is kept to what the steps need. The connection is served as raw ASGI (no
framework wrapper per message). A frame whose steps can all run at once on the event loop
(`EpisodeRegistry.step_now`: a light env, an idle episode) is answered right where it was read,
without a task, within one time slice (`dispatch.target_s`), when the connection has no frame
waiting. Otherwise the frame joins the connection's queue, which one task steps in the order the
frames came, a slice per loop iteration (so the frames of many connections take turns on the
loop), each frame answered as soon as its own steps are done. First come, first served is what
keeps the latency of every step alike: a client keeping all its episodes stepping has each of
them wait for one round of all the others, where frames sharing the loop slice by slice would
answer small frames early and large ones late, round after round, for the same coroutines.
From a frame's first step that cannot run at once on, its steps go to a task of their own
(`EpisodeRegistry.step_many`), so a slow env in one frame never holds up the frames behind it.
A connection may have at most `MAX_FRAMES_IN_FLIGHT` frames unanswered before the server stops
reading from it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

from agentrl.protocol import ErrorCode, FrameItem, StepFrame, dumps, encode_reply, loads
from agentrl.server.dispatch import LoopSlices
from agentrl.server.metrics import Metrics

MAX_FRAMES_IN_FLIGHT = 64
StepNow = Callable[[FrameItem], "bytes | None"]
StepMany = Callable[[Sequence[FrameItem]], Awaitable[list[bytes]]]


class StepSocket:
    """The `/v1/ws` endpoint, an ASGI app: `step_now` and `step_many` run a frame's items
    (`agentrl.server.frame_calls.FrameCalls`); a frame's item is called a step here, whatever its kind."""

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
        frames = _Frames(self, send)
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
                if not frames.waiting:  # nothing ahead of it: its first slice runs right here
                    parts, _ = LoopSlices(self.slice_s).run(steps, self.step_now)
                    if len(parts) == len(steps):
                        await send({"type": "websocket.send", "bytes": encode_reply(frame.id, parts)})
                        continue
                else:
                    parts = []
                await frames.add(frame.id, parts, steps[len(parts):])
        except OSError:  # uvicorn's ClientDisconnected: the client went away mid-send
            pass
        await frames.finish()  # steps already read run on, so that their results are there for a retry


class _Frames:
    """The unanswered frames of one connection, stepped first come, first served by one task."""

    def __init__(self, socket: StepSocket, send: Send) -> None:
        self.socket = socket
        self._send = send
        self.waiting: deque[tuple[int, list[bytes], Sequence[FrameItem]]] = deque()  # the head is under way
        self.slots = asyncio.Semaphore(MAX_FRAMES_IN_FLIGHT)
        self.worker: asyncio.Task | None = None
        self.handed: set[asyncio.Task] = set()  # frames whose rest went to `step_many`
        self.gone = False  # the client went away: steps still run, answers are dropped

    async def add(self, frame_id: int, parts: list[bytes], rest: Sequence[FrameItem]) -> None:
        await self.slots.acquire()
        self.waiting.append((frame_id, parts, rest))
        if self.worker is None or self.worker.done():
            self.worker = asyncio.get_running_loop().create_task(self._work())

    async def _work(self) -> None:
        try:
            await self._step_waiting()
        except BaseException:  # a bug: close the connection (its client sees it), then report it
            with contextlib.suppress(OSError):
                await self._send({"type": "websocket.close", "code": 1011})
            raise

    async def _step_waiting(self) -> None:
        socket = self.socket
        slices = LoopSlices(socket.slice_s)
        while self.waiting:
            frame_id, parts, rest = self.waiting[0]
            done = 0
            while done < len(rest):
                more, stopped = slices.run(rest, socket.step_now, done)
                parts += more
                done += len(more)
                if stopped:  # a step that cannot run at once: the rest goes to a task
                    task = asyncio.get_running_loop().create_task(self._finish(frame_id, parts, rest[done:]))
                    self.handed.add(task)
                    task.add_done_callback(self.handed.discard)
                    break
                if done < len(rest):
                    await slices.next()  # the slice is over: let the loop read and write
            self.waiting.popleft()
            if done == len(rest):
                await self.answer(frame_id, parts)

    async def _finish(self, frame_id: int, parts: list[bytes], rest: Sequence[FrameItem]) -> None:
        parts += await self.socket.step_many(rest)
        await self.answer(frame_id, parts)

    async def answer(self, frame_id: int, parts: list[bytes]) -> None:
        try:
            if not self.gone:
                await self._send({"type": "websocket.send", "bytes": encode_reply(frame_id, parts)})
        except OSError:
            self.gone = True  # its steps are done and a retry gets their results
        finally:
            self.slots.release()

    async def finish(self) -> None:
        """Wait for every frame already read to be stepped (and answered, if the client is there)."""
        while (self.worker is not None and not self.worker.done()) or self.handed:
            await asyncio.gather(*([self.worker] if self.worker else []), *self.handed)
        if self.worker is not None:
            self.worker.result()  # a failure is reported, not dropped


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
