"""Watch: a resumable stream of object changes with Kubernetes semantics over etcd's watch.

Controllers and the API's watch endpoint must see every change exactly once and in order, even
across an etcd restart; etcd's own watch stream simply breaks. This module re-opens it from the
last delivered revision (each watch on a stream of its own, :mod:`skyshift.store.etcdwatch`),
turns etcd PUT/DELETE events (with ``prev_kv``) into ADDED / MODIFIED /
DELETED, applies label selectors the way Kubernetes does (an object leaving the selector is a
DELETED), and reports compaction as :class:`Expired`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any, Literal

from aetcd import rpc

from skyshift.store.backend import WatchSource
from skyshift.store.codec import decode, labels_of
from skyshift.store.errors import Expired, StoreError, Unavailable
from skyshift.store.etcdwatch import EtcdWatch
from skyshift.store.selectors import Selector
from skyshift.store.transport import translate

log = logging.getLogger(__name__)

EventType = Literal["ADDED", "MODIFIED", "DELETED"]


@dataclass
class WatchEvent:
    type: EventType
    object: dict[str, Any]
    revision: int


def _stub(key: bytes, prefix: str, revision: int) -> dict[str, Any]:
    """The best DELETED object we can build when etcd no longer has the previous value."""
    parts = key.decode()[len(prefix) + 1 :].split("/")
    meta: dict[str, Any] = {"name": parts[-1], "resourceVersion": str(revision)}
    if len(parts) == 3:
        meta["namespace"] = parts[1]
    return {"metadata": meta}


def convert(event: Any, selector: Selector, prefix: str) -> WatchEvent | None:
    """One etcd event (``mvccpb.Event``) as a WatchEvent, or None when the selector hides it."""
    kv = event.kv
    revision = int(kv.mod_revision)
    # protobuf hands over an empty KeyValue (version 0) when there is no prev_kv.
    prev = event.prev_kv if event.prev_kv.version > 0 else None
    if event.type != rpc.Event.PUT:
        obj = decode(prev.value, revision) if prev is not None else _stub(kv.key, prefix, revision)
        if prev is not None and not selector.matches(labels_of(obj)):
            return None
        return WatchEvent("DELETED", obj, revision)
    obj = decode(kv.value, revision)
    created = kv.version == 1
    if selector.empty:
        return WatchEvent("ADDED" if created else "MODIFIED", obj, revision)
    now_in = selector.matches(labels_of(obj))
    if created:
        was_in = False
    elif prev is not None:
        was_in = selector.matches(labels_of(decode(prev.value, prev.mod_revision)))
    else:  # previous value compacted away: assume membership did not change
        was_in = now_in
    if now_in:
        return WatchEvent("MODIFIED" if was_in else "ADDED", obj, revision)
    return WatchEvent("DELETED", obj, revision) if was_in else None


async def watch_stream(
    store: WatchSource,
    what: str,
    key: bytes,
    range_end: bytes | None,
    start: int | None,
    selector: Selector,
) -> AsyncGenerator[WatchEvent, None]:
    """Events with revision > ``start`` (None: > the revision when iteration begins)."""
    last = start if start is not None else await store.revision()
    loop = asyncio.get_running_loop()
    give_up_at: float | None = None
    delay = 0.05
    while True:
        err: StoreError | None = None
        watch: EtcdWatch | None = None
        try:
            client = await store.watch_client()
            watch = await EtcdWatch.open(client, what, key, range_end, last + 1, store.timeout)
        except Exception as exc:
            err = translate(exc, what, store.timeout)
        if watch is not None:
            if give_up_at is not None:
                log.info("%s: resumed after revision %d", what, last)
            give_up_at, delay = None, 0.05
            try:
                while True:
                    try:
                        batch = await watch.next()
                    except Exception as exc:
                        err = translate(exc, what, store.timeout)
                        break
                    if batch is None:  # the stream ended: the client was closed or replaced
                        err = None if store.closed else Unavailable(f"{what}: stream ended")
                        break
                    for event in batch:
                        last = int(event.kv.mod_revision)
                        out = convert(event, selector, store.prefix)
                        if out is not None:
                            yield out
            finally:
                watch.cancel()
        if store.closed:
            return
        if isinstance(err, Expired):
            raise Expired(
                f"{what}: revision {last} was compacted (oldest available "
                f"{err.compact_revision}); list again and watch from its resourceVersion",
                err.compact_revision,
            ) from err
        if not isinstance(err, Unavailable):
            raise err or StoreError(f"{what}: watch ended unexpectedly")
        now = loop.time()
        if give_up_at is None:
            give_up_at = now + store.timeout * store.watch_reconnect_attempts
            log.warning("%s: reconnecting after revision %d: %s", what, last, err)
        elif now >= give_up_at:
            budget = store.timeout * store.watch_reconnect_attempts
            raise Unavailable(f"{what}: gave up reconnecting to etcd after {budget:g}s: {err}")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)
