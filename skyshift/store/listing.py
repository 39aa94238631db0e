"""Consistent, paginated lists: every page of one list is read at the first page's revision.

A client paging through thousands of jobs must see each object exactly once even while other
writers create, update and delete; reading every page at one etcd snapshot revision gives
that, and the continue token carries the revision. When etcd has compacted that revision the
list cannot continue consistently and the caller gets :class:`Expired` (start over).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from aetcd import rpc

from skyshift.models.base import Obj
from skyshift.store.backend import RangeReader
from skyshift.store.codec import (
    decode,
    decode_continue,
    encode_continue,
    labels_of,
    list_prefix,
    prefix_range_end,
)
from skyshift.store.errors import Expired
from skyshift.store.selectors import Selector


@dataclass
class ListResult:
    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str | None


class Pager(Protocol):
    async def list(
        self, plural: str, namespace: str | None = None, *, limit: int | None = None,
        continue_token: str | None = None,
    ) -> ListResult: ...


async def list_objects(
    store: RangeReader,
    plural: str,
    namespace: str | None,
    selector: Selector,
    limit: int | None,
    continue_token: str | None,
) -> ListResult:
    """One page (or everything, without ``limit``) of matching objects, sorted by key.

    etcd is read in batches of ``store.list_batch`` keys so no single response gets huge.
    ``limit`` counts matching items; with a selector the last page may come back empty.
    """
    prefix = list_prefix(store.prefix, plural, namespace)
    start, end, snapshot = prefix, prefix_range_end(prefix), 0
    if continue_token:
        last, snapshot = decode_continue(continue_token, prefix)
        start = last + b"\0"
    want = limit if limit is not None and limit > 0 else None
    what = f"list {plural}" + (f" in {namespace}" if namespace else "")
    items: list[Obj] = []
    last_key: bytes | None = None
    more = False
    while True:
        batch = store.list_batch
        if want is not None and selector.empty:
            batch = min(batch, want - len(items))
        request = rpc.RangeRequest(key=start, range_end=end, limit=batch, revision=snapshot)
        try:
            resp = await store.read_range(what, request)
        except Expired as exc:
            oldest = await store.compacted_revision()
            raise Expired(
                f"{what}: the continue token is too old: revision {snapshot} was compacted "
                f"(oldest available {oldest}); list again without the continue token",
                oldest,
            ) from exc
        snapshot = snapshot or int(resp.header.revision)
        full = False
        for kv in resp.kvs:
            if want is not None and len(items) >= want:
                full = True  # a matching-or-not key remains after the page
                break
            last_key = kv.key
            obj = decode(kv.value, kv.mod_revision)
            if selector.matches(labels_of(obj)):
                items.append(obj)
        more = full or bool(resp.more)
        if last_key is not None:
            start = last_key + b"\0"
        if full or not resp.more or (want is not None and len(items) >= want):
            break
    token = encode_continue(last_key, snapshot) if more and last_key is not None else None
    return ListResult(items=items, resource_version=str(snapshot), continue_token=token)


async def list_in_pages(store: Pager, plural: str, page: int = 500) -> list[Obj]:
    """Every ``plural`` object of every namespace, read ``page`` at a time (one snapshot)."""
    items: list[Obj] = []
    token: str | None = None
    while True:
        result = await store.list(plural, limit=page, continue_token=token)
        items += result.items
        token = result.continue_token
        if not token:
            return items


@dataclass
class Changes:
    """What :func:`changed_since` read."""

    items: list[Obj]  # the objects modified after the revision asked for
    count: int  # how many objects there are in all, changed or not
    revision: int  # the snapshot read: ask for changes after it next time


async def changed_since(store: RangeReader, plural: str, after: int) -> Changes:
    """The ``plural`` objects of every namespace modified after revision ``after`` (0: all), in
    batches at one snapshot revision. etcd filters by modification revision itself, so only the
    changed objects are sent and decoded: a reader that keeps what it read before pays for the
    changes, not for every object. ``count`` tells it about deletions (which no revision
    filter returns): it holds more objects than ``count`` when some were deleted."""
    prefix = list_prefix(store.prefix, plural, None)
    start, end, snapshot, count = prefix, prefix_range_end(prefix), 0, 0
    items: list[Obj] = []
    what = f"list {plural} changed since revision {after}"
    while True:
        request = rpc.RangeRequest(key=start, range_end=end, limit=store.list_batch,
                                   revision=snapshot, min_mod_revision=after + 1 if after else 0)
        resp = await store.read_range(what, request)
        if not snapshot:  # the first batch counts the whole range; later ones only their rest
            snapshot, count = int(resp.header.revision), int(resp.count)
        items += [decode(kv.value, kv.mod_revision) for kv in resp.kvs]
        if not resp.more or not resp.kvs:
            return Changes(items, count, snapshot)
        start = resp.kvs[-1].key + b"\0"
