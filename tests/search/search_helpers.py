"""Helpers for the search tests: a live server on 127.0.0.1 and the Java skip-or-fail rule."""

from __future__ import annotations

import threading
import time

from support import free_port, unavailable


def require_java() -> None:
    """Skip without Java/pyserini, but fail under CI, where a missing runtime is a broken install."""
    from agentrl.retrievers.lucene import java_available

    reason = java_available()
    if reason:
        unavailable(f"Lucene needs Java 21 and pyserini: {reason}")


class LiveServer:
    """uvicorn serving an app on 127.0.0.1 in a background thread, stopped on exit."""

    def __init__(self, app) -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("retrieval server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
