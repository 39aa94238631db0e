"""first_to_end: the watches of one task end together, so a restart never leaves one running."""

from __future__ import annotations

import asyncio

import pytest

from skyshift.workers.common import first_to_end


async def test_one_stream_failing_cancels_the_others_and_is_raised() -> None:
    cancelled = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def fails() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("etcd away")

    with pytest.raises(RuntimeError, match="etcd away"):
        await first_to_end(forever(), fails())
    assert cancelled.is_set()


async def test_one_stream_ending_ends_the_others() -> None:
    left: list[str] = []

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            left.append("forever")

    async def ends() -> None:
        await asyncio.sleep(0)

    await first_to_end(forever(), ends())
    assert left == ["forever"]
