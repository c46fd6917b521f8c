"""Many records in flight, one key's in order: `streams.concurrency.KeyedTasks`."""

from __future__ import annotations

import asyncio

import pytest

from streams.concurrency import PENDING_PER_SLOT, KeyedTasks


def test_one_keys_records_run_in_order_while_other_keys_overlap() -> None:
    log: list[str] = []
    running = {"now": 0, "most": 0}

    async def work(name: str, delay: float) -> None:
        running["now"] += 1
        running["most"] = max(running["most"], running["now"])
        log.append(f"start {name}")
        await asyncio.sleep(delay)
        log.append(f"end {name}")
        running["now"] -= 1

    async def run() -> None:
        tasks = KeyedTasks(limit=4)
        await tasks.submit("ann", 0, lambda: work("ann-1", 0.05))
        await tasks.submit("ann", 0, lambda: work("ann-2", 0.0))
        await tasks.submit("bob", 1, lambda: work("bob-1", 0.01))
        await tasks.drain()

    asyncio.run(run())
    assert log.index("end ann-1") < log.index("start ann-2")
    assert log.index("start bob-1") < log.index("end ann-1")  # bob did not wait for ann
    assert running["most"] == 2


def test_no_more_than_the_limit_run_at_once() -> None:
    running = {"now": 0, "most": 0}

    async def work() -> None:
        running["now"] += 1
        running["most"] = max(running["most"], running["now"])
        await asyncio.sleep(0.01)
        running["now"] -= 1

    async def run() -> None:
        tasks = KeyedTasks(limit=3)
        for user in range(20):
            await tasks.submit(f"user-{user}", user % 4, work)
        await tasks.drain()

    asyncio.run(run())
    assert running["most"] == 3


def test_submit_waits_while_too_many_records_are_pending() -> None:
    release = asyncio.Event

    async def run() -> tuple[int, int]:
        gate = release()
        tasks = KeyedTasks(limit=1)

        async def blocked() -> None:
            await gate.wait()

        for index in range(PENDING_PER_SLOT):
            await tasks.submit(f"user-{index}", 0, blocked)
        late = asyncio.create_task(tasks.submit("late", 0, blocked))
        await asyncio.sleep(0.05)
        waiting = tasks.pending
        assert not late.done()  # the agent stops reading: backpressure
        gate.set()
        await late
        await tasks.drain()
        return waiting, tasks.pending

    assert asyncio.run(run()) == (PENDING_PER_SLOT, 0)


def test_cancelling_a_partition_stops_its_records_and_their_successors_only() -> None:
    done: list[str] = []

    async def run() -> int:
        gate = asyncio.Event()
        tasks = KeyedTasks(limit=4)

        async def wait_then(name: str) -> None:
            await gate.wait()
            done.append(name)

        await tasks.submit("ann", 0, lambda: wait_then("ann-1"))
        await tasks.submit("ann", 0, lambda: wait_then("ann-2"))
        await tasks.submit("bob", 1, lambda: wait_then("bob-1"))
        await asyncio.sleep(0.01)
        cancelled = await tasks.cancel({0})
        gate.set()
        await tasks.drain()
        return cancelled

    assert asyncio.run(run()) == 2
    assert done == ["bob-1"]


def test_a_failed_record_stops_its_key_and_is_raised_by_the_next_submit() -> None:
    ran: list[str] = []

    async def run() -> None:
        tasks = KeyedTasks(limit=2)

        async def fail() -> None:
            raise RuntimeError("boom")

        async def later() -> None:
            ran.append("ann-2")

        await tasks.submit("ann", 0, fail)
        await tasks.submit("ann", 0, later)
        await asyncio.sleep(0.01)
        await tasks.submit("bob", 1, later)

    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(run())
    assert ran == []
