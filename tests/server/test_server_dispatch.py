"""The packed executor: short calls share thread hops, waiting calls run side by side."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentrl.server.dispatch import PackedExecutor


def spin(seconds: float) -> None:
    """Compute for `seconds` of this thread's CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_short_calls_are_packed_into_few_thread_hops():
    async def main():
        ex = PackedExecutor(workers=16)
        hops: list[int] = []
        original = ex._run_pack

        def counting(*args):
            hops.append(1)
            return original(*args)

        for _ in range(200):  # the first calls measure the cost (a busy machine may need a few)
            await ex.run("quick", lambda i: i * 2, 0)
            if ex.pack_size("quick") >= 100:
                break
        ex._run_pack = counting  # type: ignore[method-assign]
        results = await asyncio.gather(*(ex.run("quick", lambda i: i * 2, i) for i in range(500)))
        ex.shutdown()
        return results, len(hops)

    results, hops = asyncio.run(main())
    assert results == [i * 2 for i in range(500)]
    assert hops < 50  # microsecond calls travel many to a hop (1 + 500 hops without packing)


def test_waiting_calls_run_side_by_side():
    async def main():
        ex = PackedExecutor(workers=32)
        started = time.perf_counter()
        await asyncio.gather(*(ex.run("sleepy", time.sleep, 0.2) for _ in range(32)))
        elapsed = time.perf_counter() - started
        ex.shutdown()
        return elapsed, ex.concurrency("sleepy"), ex.pack_size("sleepy")

    elapsed, concurrency, size = asyncio.run(main())
    assert elapsed < 2.0  # 32 x 0.2 s one after another would take 6.4 s
    assert concurrency == 32 and size == 1


def test_cpu_bound_calls_run_one_pack_at_a_time():
    async def main():
        ex = PackedExecutor(workers=32)
        for _ in range(5):
            await asyncio.gather(*(ex.run("spin", spin, 0.003) for _ in range(8)))
        ex.shutdown()
        return ex.concurrency("spin"), ex.cpu_share["spin"]

    concurrency, share = asyncio.run(main())
    assert share > 0.5 and concurrency == 1


def test_each_call_gets_its_own_result_or_error():
    def maybe(i: int) -> int:
        if i % 3 == 0:
            raise ValueError(f"bad {i}")
        return i

    async def main():
        ex = PackedExecutor(workers=4)
        await ex.run("maybe", maybe, 1)
        out = await asyncio.gather(*(ex.run("maybe", maybe, i) for i in range(30)), return_exceptions=True)
        ex.shutdown()
        return out

    for i, value in enumerate(asyncio.run(main())):
        if i % 3 == 0:
            assert isinstance(value, ValueError) and str(value) == f"bad {i}"
        else:
            assert value == i


def test_after_shutdown_calls_fail_instead_of_hanging():
    async def main():
        ex = PackedExecutor(workers=2)
        ex.shutdown()
        with pytest.raises(RuntimeError):
            await asyncio.wait_for(ex.run("late", time.sleep, 0), timeout=5)

    asyncio.run(main())


def test_short_calls_run_on_the_event_loop_and_long_ones_do_not():
    import threading

    def where(_: int) -> int:
        return threading.get_ident()

    def nap(_: int) -> int:
        time.sleep(0.002)
        return threading.get_ident()

    async def main():
        ex = PackedExecutor(workers=4)
        loop_thread = threading.get_ident()
        for kind, fn in (("quick", where), ("nap", nap)):
            for _ in range(50):  # measured first, in threads (a busy machine may need a few rounds)
                await asyncio.gather(*(ex.run(kind, fn, i) for i in range(4)))
                if ex.inline(kind) or (kind == "nap" and ex.cost.get(kind)):
                    break
        quick = await asyncio.gather(*(ex.run("quick", where, i) for i in range(100)))
        napping = await asyncio.gather(*(ex.run("nap", nap, i) for i in range(4)))
        ex.shutdown()
        return loop_thread, quick, napping, ex.inline("quick"), ex.inline("nap")

    loop_thread, quick, napping, quick_inline, nap_inline = asyncio.run(main())
    assert quick_inline and set(quick) == {loop_thread}
    assert not nap_inline and loop_thread not in napping



def test_computing_calls_slow_only_in_threads_are_tried_on_the_loop_and_stay_there():
    """A call that computes costs more in a thread than on the loop (GIL waits, cores shared by the
    two threads): a kind measured over the bound in threads, but under it on the loop, must end up
    on the loop; one as slow on the loop goes back, and one that waits is never tried there."""
    import threading

    from agentrl.server.dispatch import RESAMPLE_EVERY

    loop_thread = threading.get_ident()

    def cheaper_on_the_loop(_: int) -> int:
        spin(0.0001 if threading.get_ident() == loop_thread else 0.0009)
        return threading.get_ident()

    def slow_anywhere(_: int) -> int:
        spin(0.0009)
        return threading.get_ident()

    def waits(_: int) -> int:
        time.sleep(0.0009)
        return threading.get_ident()

    async def main():
        ex = PackedExecutor(workers=4)
        ran: dict[str, set[int]] = {}
        for kind, fn in (("cheaper", cheaper_on_the_loop), ("slow", slow_anywhere), ("waits", waits)):
            threads = ran.setdefault(kind, set())
            for _ in range(3 * RESAMPLE_EVERY):
                threads.add(await ex.run(kind, fn, 0))
        last = await asyncio.gather(*(ex.run("cheaper", cheaper_on_the_loop, i) for i in range(20)))
        ex.shutdown()
        return ex, ran, last

    ex, ran, last = asyncio.run(main())
    assert ex.inline("cheaper") and set(last) == {loop_thread}
    assert loop_thread in ran["slow"] and not ex.inline("slow")  # tried, and sent back to the threads
    assert loop_thread not in ran["waits"] and not ex.inline("waits")


def test_a_kind_on_the_loop_stays_there_until_twice_the_bound():
    """A kind comes onto the loop under the bound and leaves it only past twice the bound, so that
    the machine slowing down for a moment does not send it to the threads (where it costs more)."""
    from agentrl.server.dispatch import COST_WINDOW, LEAVE_LOOP_AT

    ex = PackedExecutor(workers=2)
    bound = ex.inline_below_s
    for per_call, on_loop in ((0.5 * bound, True), (0.9 * LEAVE_LOOP_AT * bound, True),
                              (1.1 * LEAVE_LOOP_AT * bound, False), (0.9 * LEAVE_LOOP_AT * bound, False),
                              (0.5 * bound, True)):
        for _ in range(COST_WINDOW):  # a whole window, so that the median is this figure
            ex._measured("kind", per_call)
        assert ex.inline("kind") is on_loop, (per_call / bound, on_loop)
    ex.shutdown()
