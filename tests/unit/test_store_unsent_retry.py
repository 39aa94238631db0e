"""A write gRPC never sent (no connected address) is sent again; one whose fate is unknown is not.

The integration test ``test_calls_wait_out_a_short_etcd_restart`` runs this against a real etcd
restart, where the window (a channel that still looks ready while etcd is down) is a race; here
the RPC layer below the store is replaced so both outcomes are forced.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from skyshift.store import ObjectStore, Unavailable
from skyshift.store.transport import never_sent


def _rpc_error(details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(
        grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), details
    )


UNSENT = (
    "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: "
    "Connection refused"
)
LOST = "Socket closed"


class _Conn:
    authenticated = False

    async def ready(self, wait: float) -> object:
        return object()


def _store() -> ObjectStore:
    store = ObjectStore("127.0.0.1:1", timeout=2)
    store._conn = _Conn()  # type: ignore[assignment]
    return store


def _failing(details: str, times: int) -> tuple[list[int], Any]:
    calls = [0]

    async def fn(_client: object) -> str:
        calls[0] += 1
        if calls[0] <= times:
            raise _rpc_error(details)
        return "applied"

    return calls, fn


def test_never_sent_tells_an_unconnected_call_from_a_lost_one() -> None:
    assert never_sent(_rpc_error(UNSENT))
    assert not never_sent(_rpc_error(LOST))
    assert not never_sent(RuntimeError(UNSENT))


def test_a_write_that_was_never_sent_is_sent_again() -> None:
    calls, fn = _failing(UNSENT, 2)
    assert asyncio.run(_store()._call("create jobs/default/b", fn, retry=False)) == "applied"
    assert calls[0] == 3


def test_a_write_whose_outcome_is_unknown_is_not_sent_again() -> None:
    calls, fn = _failing(LOST, 1)
    with pytest.raises(Unavailable, match="create jobs/default/b: etcd is unavailable"):
        asyncio.run(_store()._call("create jobs/default/b", fn, retry=False))
    assert calls[0] == 1


def test_an_unsent_write_gives_up_at_the_timeout() -> None:
    calls, fn = _failing(UNSENT, 10_000)
    with pytest.raises(Unavailable, match="failed to connect"):
        asyncio.run(_store()._call("create jobs/default/b", fn, retry=False))
    assert 3 <= calls[0] < 100
