"""One etcd watch on a gRPC stream of its own.

aetcd multiplexes every watch of a client over one shared stream and pairs etcd's "created"
answers with watches by arrival order. When an answer came after aetcd's timeout it was paired
with the next watch being opened, which then delivered another key range's events (a watch on
one namespace streaming another's objects). Here each watch owns its stream: nothing can be
misrouted, a slow consumer holds back only its own stream (gRPC flow control, not an unbounded
queue), and etcd cancelling a watch (compaction, a revoked token) is reported instead of
silently ending it. Streams share the client's one HTTP/2 connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import aetcd
import grpc
from aetcd import rpc

from skyshift.store.errors import Expired, StoreError, Unavailable


class EtcdWatch:
    """Events of one key range from ``start_revision`` on; :meth:`open` it, then :meth:`next`."""

    def __init__(self, call: Any, what: str) -> None:
        self._call = call
        self._what = what

    @classmethod
    async def open(
        cls,
        client: aetcd.Client,
        what: str,
        key: bytes,
        range_end: bytes | None,
        start_revision: int,
        timeout: float,
    ) -> EtcdWatch:
        """Create the watch; Expired when ``start_revision`` was compacted, Unavailable when etcd
        does not confirm it within ``timeout`` seconds (gRPC errors propagate raw)."""
        if client.channel is None:
            raise Unavailable(f"{what}: etcd client is closed")
        create = rpc.WatchCreateRequest(key=key, start_revision=start_revision, prev_kv=True)
        if range_end is not None:
            create.range_end = range_end
        call = rpc.WatchStub(client.channel).Watch(metadata=client.metadata)
        watch = cls(call, what)
        try:
            async with asyncio.timeout(timeout):
                await call.write(rpc.WatchRequest(create_request=create))
                first = await call.read()
            if first is grpc.aio.EOF:
                raise Unavailable(f"{what}: etcd closed the watch stream")
            if not first.created:
                raise StoreError(f"{what}: etcd answered a watch creation with {first!r}")
            watch._check(first)
        except TimeoutError:
            watch.cancel()
            msg = f"{what}: etcd did not confirm the watch within {timeout:g}s"
            raise Unavailable(msg) from None
        except asyncio.CancelledError:
            watch.cancel()
            if _cancelled_from_outside():
                raise
            raise Unavailable(f"{what}: the etcd connection closed") from None
        except BaseException:
            watch.cancel()
            raise
        return watch

    def _check(self, resp: Any) -> None:
        if resp.compact_revision:
            raise Expired(
                f"{self._what}: revision was compacted (oldest available {resp.compact_revision})",
                int(resp.compact_revision),
            )
        if resp.canceled:
            reason = resp.cancel_reason or "no reason given"
            if "permission denied" in reason:
                raise StoreError(f"{self._what}: etcd denied the watch to this user ({reason})")
            # e.g. an expired token: the caller reconnects (logging in again) and resumes
            raise Unavailable(f"{self._what}: etcd cancelled the watch ({reason})")

    async def next(self) -> Sequence[Any] | None:
        """The next batch of etcd events (``mvccpb.Event``), or None when the stream ended."""
        while True:
            try:
                resp = await self._call.read()
            except asyncio.CancelledError:
                if _cancelled_from_outside():
                    raise
                return None  # the channel closed under the call (the store closed its client)
            if resp is grpc.aio.EOF:
                return None
            self._check(resp)
            if resp.events:
                return list(resp.events)

    def cancel(self) -> None:
        """Close the stream (etcd drops the watch with it); safe to call twice."""
        self._call.cancel()


def _cancelled_from_outside() -> bool:
    """grpc.aio raises CancelledError when the channel closes under a call; only a cancellation
    of the running task itself must propagate as one."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
