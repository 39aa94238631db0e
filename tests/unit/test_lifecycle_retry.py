"""Lifecycle notifications that failed while Temporal was away are sent again, in order.

The Temporal side is a stand-in (a send function that fails like a client that cannot connect,
until told Temporal is back); the real stack runs in
tests/faults/test_lifecycle_temporal_return.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.service import RPCError, RPCStatusCode

from skyshift.api.lifecycle import TemporalLifecycle
from skyshift.api.lifecycle_retry import Redelivery, unreachable


class Temporal:
    """Records what reached it; raises like an unreachable server while ``down``."""

    def __init__(self) -> None:
        self.down = True
        self.got: list[tuple[str, str]] = []

    def send(self, what: str) -> Any:
        async def call(obj: dict[str, Any]) -> None:
            if self.down:
                raise RuntimeError("Failed client connect: Server connection error")
            self.got.append((what, obj["metadata"]["name"]))
        return call


def job(name: str) -> dict[str, Any]:
    return {"kind": "Job", "metadata": {"name": name, "namespace": "default"}}


async def wait_for(cond: Any, timeout: float = 10) -> None:
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.01)


def test_what_counts_as_unreachable() -> None:
    assert unreachable(RuntimeError("Failed client connect: tcp connect error"))
    assert unreachable(RPCError("down", RPCStatusCode.UNAVAILABLE, b""))
    assert unreachable(ConnectionRefusedError())
    assert not unreachable(RPCError("bad", RPCStatusCode.INVALID_ARGUMENT, b""))
    assert not unreachable(ValueError("Endpoints has no lifecycle workflow"))


async def test_notifications_wait_and_go_in_order_once_temporal_answers() -> None:
    t = Temporal()
    r = Redelivery(first=0.01, cap=0.02)
    r.add("Job/default/a", "created", t.send("created"), job("a"))
    r.add("Job/default/b", "created", t.send("created"), job("b"))
    r.add("Job/default/a", "deleting", t.send("deleting"), job("a"))
    await asyncio.sleep(0.1)
    assert t.got == [] and len(r) == 2  # still away: nothing lost, nothing sent
    t.down = False
    await wait_for(lambda: len(r) == 0)
    assert t.got == [("created", "a"), ("deleting", "a"), ("created", "b")]
    assert r.delivered == 3
    await r.close()


async def test_a_refused_notification_is_dropped_and_the_rest_go_on() -> None:
    t = Temporal()
    t.down = False

    async def refused(_obj: dict[str, Any]) -> None:
        raise ValueError("invalid input")

    r = Redelivery(first=0.01)
    r.add("Job/default/a", "created", refused, job("a"))
    r.add("Job/default/a", "spec_changed", t.send("spec_changed"), job("a"))
    await wait_for(lambda: len(r) == 0)
    assert t.got == [("spec_changed", "a")]
    assert (r.delivered, r.dropped) == (1, 1)


async def test_bounded_in_objects_and_in_time() -> None:
    t = Temporal()
    r = Redelivery(first=0.01, max_objects=1, give_up_after=0.05)
    assert r.add("Job/default/a", "created", t.send("created"), job("a"))
    assert not r.add("Job/default/b", "created", t.send("created"), job("b"))  # reconciler's
    t.down = False
    await asyncio.sleep(0.1)  # past give_up_after before Temporal answered a round
    await wait_for(lambda: len(r) == 0)
    assert r.dropped >= 1
    await r.close()


async def test_the_api_hook_queues_behind_what_waits_for_the_same_object(
    monkeypatch: Any,
) -> None:
    """While ``created`` of a job waits for Temporal, its ``deleting`` waits behind it even if
    Temporal answers by then; other objects go straight through."""
    t = Temporal()

    async def client() -> Any:
        return object()

    lc = TemporalLifecycle(connect=client)
    lc.redelivery.first = 0.01
    lc.redelivery.probe = None
    monkeypatch.setattr(lc, "_ensure", t.send("created"))
    monkeypatch.setattr(lc, "_delete", t.send("deleting"))
    await lc.created(job("a"))  # Temporal is down: kept, no error for the API
    assert lc.redelivery.holds("Job/default/a")
    t.down = False
    await lc.deleting(job("a"))
    await lc.created(job("b"))
    assert t.got == [("created", "b")]
    await wait_for(lambda: len(lc.redelivery) == 0)
    assert t.got == [("created", "b"), ("created", "a"), ("deleting", "a")]
    await lc.close()
