"""The Slurm adapter's concurrency helpers: a delete runs alone and is not starved, one holder
per name, and concurrent lookups share one fetch that started after they asked."""

from __future__ import annotations

import asyncio

import pytest

from skyshift.compat.common.name_locks import NameLocks
from skyshift.compat.slurm.gate import Coalescer, Gate


async def test_exclusive_waits_for_shared_and_blocks_new_shared() -> None:
    gate, order = Gate(), []
    release = asyncio.Event()

    async def sharer(tag: str, wait: bool) -> None:
        async with gate.shared():
            order.append(f"{tag}+")
            if wait:
                await release.wait()
            order.append(f"{tag}-")

    async def deleter() -> None:
        async with gate.exclusive():
            order.append("x")

    first = asyncio.create_task(sharer("a", True))
    await asyncio.sleep(0)
    excl = asyncio.create_task(deleter())
    await asyncio.sleep(0)
    late = asyncio.create_task(sharer("b", False))  # arrives while the delete waits
    await asyncio.sleep(0.01)
    assert order == ["a+"]
    release.set()
    await asyncio.gather(first, excl, late)
    assert order == ["a+", "a-", "x", "b+", "b-"]


async def test_gate_admits_in_arrival_order() -> None:
    """Deletes queued one after another do not keep out a submit that came between them."""
    gate, order = Gate(), []

    async def run(tag: str, exclusive: bool) -> None:
        async with gate.exclusive() if exclusive else gate.shared():
            order.append(tag)
            await asyncio.sleep(0.01)

    tasks = []
    for tag, exclusive in (("x1", True), ("s1", False), ("x2", True), ("s2", False),
                           ("s3", False)):
        tasks.append(asyncio.create_task(run(tag, exclusive)))
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    assert order == ["x1", "s1", "x2", "s2", "s3"]


async def test_gate_cancelled_waiter_lets_the_next_in() -> None:
    gate = Gate()
    async with gate.shared():
        waiter = asyncio.create_task(gate.exclusive().__aenter__())
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.sleep(0)
    async with gate.exclusive():  # not blocked by the cancelled waiter
        pass


async def test_name_locks_serialise_a_name_only() -> None:
    locks, inside = NameLocks(), []

    async def hold(names: list[str], tag: str) -> None:
        async with locks.hold(names):
            inside.append(tag)
            await asyncio.sleep(0.01)
            inside.remove(tag)

    async def watch() -> list[list[str]]:
        seen = []
        for _ in range(5):
            seen.append(sorted(inside))
            await asyncio.sleep(0.004)
        return seen

    *_, seen = await asyncio.gather(hold(["a"], "1"), hold(["a", "b"], "2"), hold(["c"], "3"),
                                    watch())
    assert ["1", "3"] in seen  # different names at once
    assert all(not {"1", "2"} <= set(s) for s in seen)  # never the same name twice
    assert not locks._locks and not locks._users  # nothing kept after use


async def test_coalescer_shares_one_fetch_per_round() -> None:
    fetched: list[list[str]] = []
    gate = asyncio.Event()

    async def fetch(names: list[str]) -> list[str]:
        fetched.append(names)
        await gate.wait()
        return names

    co: Coalescer[list[str]] = Coalescer(fetch)
    first = asyncio.create_task(co.get(["a"]))
    await asyncio.sleep(0)
    rest = [asyncio.create_task(co.get([n])) for n in ("b", "c", "b")]
    await asyncio.sleep(0)
    gate.set()
    assert await first == ["a"]
    assert [await t for t in rest] == [["b", "c"]] * 3
    assert fetched == [["a"], ["b", "c"]]


async def test_coalescer_passes_errors_to_every_caller() -> None:
    async def fetch(names: list[str]) -> None:
        await asyncio.sleep(0)
        raise RuntimeError("squeue failed")

    co: Coalescer[None] = Coalescer(fetch)
    results = await asyncio.gather(co.get(["a"]), co.get(["b"]), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)
    with pytest.raises(RuntimeError):
        await co.get(["c"])
