"""Search-R1's retrieval server: `POST /retrieve`, batched on one worker thread.

The retriever (a JVM searcher, an ONNX session, a faiss index) is touched only by one worker
thread, so concurrent requests can neither race inside it nor oversubscribe the CPU. Requests
wait in a bounded queue; the worker takes everything waiting (up to `max_batch` queries) and
answers it with one batched search. A full queue answers 503 at once instead of piling up.

A body that is not a valid request answers 400 (not JSON) or 422 (JSON of the wrong shape) with
`{"detail": "<what is wrong>"}`. The message names the fields and never echoes their values: a
value may be NaN or Infinity (Python's JSON reader accepts them, no JSON writer may send them back)
or megabytes long.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, model_validator

from agentrl.retrievers.base import Retriever
from agentrl.serving.apps import server_app

MAX_TOPK = 100


class RetrieveRequest(BaseModel):
    """Search-R1's request; `query` (one string) is the form some forks send instead of `queries`."""

    queries: list[str] | None = Field(default=None, max_length=4096)
    query: str | None = None
    topk: int | None = Field(default=None, ge=1, le=MAX_TOPK)
    return_scores: bool = False

    @model_validator(mode="after")
    def _one_form(self) -> RetrieveRequest:
        if self.queries is None and self.query is None:
            raise ValueError("send 'queries' (a list of strings) or 'query' (one string)")
        return self

    def query_list(self) -> list[str]:
        return list(self.queries) if self.queries is not None else [self.query or ""]


def validation_message(errors: Sequence[Any]) -> str:
    """One line naming each invalid field and what is wrong with it, without the values sent."""
    problems = []
    for err in errors:
        if err.get("type") == "json_invalid":  # FastAPI's location for it is ("body", <offset>)
            problems.append(f"body: not valid JSON ({(err.get('ctx') or {}).get('error', 'unreadable')})")
            continue
        where = ".".join(str(part) for part in err.get("loc", ()) if part != "body") or "body"
        problems.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(problems) or "invalid request"


class RetrieveResponse(BaseModel):
    result: list[list[dict[str, Any]]]


@dataclass
class _Job:
    queries: list[str]
    topk: int
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop


class BatchWorker:
    """Owns the retriever; turns whatever requests are waiting into one search call."""

    def __init__(self, retriever: Retriever, max_batch: int = 64, queue_size: int = 256) -> None:
        self.retriever = retriever
        self.max_batch = max_batch
        self.jobs: queue.Queue[_Job | None] = queue.Queue(maxsize=queue_size)
        self.thread = threading.Thread(target=self._run, name="retriever", daemon=True)
        self.batches = 0

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.jobs.put(None)
        self.thread.join(timeout=30)

    def submit(self, queries: list[str], topk: int) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        job = _Job(queries, topk, loop.create_future(), loop)
        self.jobs.put_nowait(job)  # raises queue.Full: the caller answers 503
        return job.future

    def _run(self) -> None:
        while True:
            first = self.jobs.get()
            if first is None:
                return
            batch, size = [first], len(first.queries)
            while size < self.max_batch:
                try:
                    job = self.jobs.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    self.jobs.put(None)
                    break
                batch.append(job)
                size += len(job.queries)
            self._answer(batch)

    def _answer(self, batch: list[_Job]) -> None:
        self.batches += 1
        queries = [q for job in batch for q in job.queries]
        try:
            hits = self.retriever.search(queries, max(job.topk for job in batch))
        except Exception as exc:  # one bad batch must not kill the worker
            if len(batch) > 1:  # nor fail the requests batched with the one that broke it
                for job in batch:
                    self._answer([job])
                return
            batch[0].loop.call_soon_threadsafe(_settle, batch[0].future, None, exc)
            return
        start = 0
        for job in batch:
            part = [h[: job.topk] for h in hits[start : start + len(job.queries)]]
            start += len(job.queries)
            job.loop.call_soon_threadsafe(_settle, job.future, part, None)


def _settle(future: asyncio.Future, value: Any, error: BaseException | None) -> None:
    if future.done():  # the client went away
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


def create_app(
    retriever: Retriever, *, default_topk: int = 3, max_batch: int = 64, queue_size: int = 256
) -> FastAPI:
    """Search-R1's `/retrieve` over `retriever`, its queries batched by one worker thread, on the
    skeleton every agentrl server shares (`agentrl.serving.apps.server_app`)."""
    worker = BatchWorker(retriever, max_batch=max_batch, queue_size=queue_size)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        worker.start()
        yield
        worker.stop()

    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": validation_message(exc.errors())}, status_code=422)

    return server_app("agentrl retrieval server", state={"worker": worker}, lifespan=lifespan,
                      errors={RequestValidationError: invalid},
                      routers=[_routes(retriever, worker, default_topk)])


def _routes(retriever: Retriever, worker: BatchWorker, default_topk: int) -> APIRouter:
    router = APIRouter()

    @router.post("/retrieve", response_model=RetrieveResponse)
    async def retrieve(request: RetrieveRequest) -> dict[str, Any]:
        queries = request.query_list()
        if not queries:
            return {"result": []}
        try:
            future = worker.submit(queries, request.topk or default_topk)
        except queue.Full:
            raise HTTPException(503, "retrieval queue is full; retry shortly") from None
        try:
            hits = await future
        except Exception as exc:
            raise HTTPException(500, f"retrieval failed: {type(exc).__name__}: {exc}") from exc
        return {"result": [[h.as_json(request.return_scores) for h in per_query] for per_query in hits]}

    @router.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "healthy", "backend": retriever.backend, "batches": worker.batches}

    return router
