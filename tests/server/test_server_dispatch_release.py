"""A call run in a worker thread holds nothing once its caller has the answer.

The thread's work item outlives the answer (it is dropped when the thread gets round to it), so a
pack that kept its calls would keep their functions and arguments alive, such as a closed episode's
env, whose state the server's collector has frozen: only a full sweep would get it back.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import Any

from agentrl.server.dispatch import PackedExecutor


class _Held:
    def work(self, n: int) -> str:
        return "ok" * n


def test_a_threaded_call_lets_go_of_its_function_and_arguments_when_answered():
    async def main() -> tuple[str, bool]:
        ex = PackedExecutor(workers=2)  # a kind never measured runs in a thread
        submit = ex.pool.submit

        def lingering(fn: Any, *args: Any) -> Any:
            def run() -> None:
                fn(*args)
                time.sleep(0.3)  # the thread holds its work item, pack included, after answering
            return submit(run)

        ex.pool.submit = lingering  # type: ignore[method-assign]
        held = _Held()
        alive = weakref.ref(held)
        future = ex.run("slow", held.work, 1)
        del held
        result = await future
        gone = alive() is None  # reference counts alone, no collection
        ex.shutdown()
        return result, gone

    result, gone = asyncio.run(main())
    assert result == "ok"
    assert gone
