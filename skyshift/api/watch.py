"""``?watch=true``: object changes streamed as newline-delimited JSON.

Semantics (Kubernetes'):

* each line is ``{"type": "ADDED"|"MODIFIED"|"DELETED", "object": {...}}``;
* with ``resourceVersion=N`` (N > 0) the stream holds exactly the changes after revision N, in
  order, once each; a client resumes by passing the resourceVersion of the last event it saw;
* without it (or with ``0``) the stream first sends every current object as ``ADDED`` (one
  consistent snapshot), then the changes after that snapshot;
* a compacted N is ``410 Gone`` before the stream starts; if etcd reports it later, or etcd
  stays unreachable, the stream ends with ``{"type": "ERROR", "object": {"error": {...}}}``
  (the common error shape) and the client lists again;
* keep-alive: after ``keepalive`` idle seconds a blank line is sent (ndjson readers skip blank
  lines); with ``allowWatchBookmarks=true`` a ``BOOKMARK`` event whose
  ``object.metadata.resourceVersion`` is the last revision delivered is sent instead;
* ``timeoutSeconds`` ends the stream cleanly after that many seconds, at most
  ``MAX_WATCH_TIMEOUT`` (3600; more is a 422 naming it). Kubernetes ends a watch without
  ``timeoutSeconds`` after a random 30-60 min (``--min-request-timeout``); an hour is that
  range's top, and a client wanting longer resumes with the last resourceVersion;
* ``resourceVersion`` is ASCII digits below 2**63 - 1 (etcd's int64), otherwise a 400 naming it.

A pump task reads the store's watch into a bounded queue, so keep-alives never cancel a pending
etcd read and a slow client applies back-pressure instead of growing memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi.responses import StreamingResponse

from skyshift.api.errors import ApiError, from_store
from skyshift.models.base import API_VERSION
from skyshift.models.registry import KindInfo
from skyshift.store import ObjectStore, WatchEvent
from skyshift.store.codec import MAX_REVISION, parse_revision
from skyshift.store.errors import InvalidArgument, NotFound, StoreError

log = logging.getLogger(__name__)

NDJSON = "application/x-ndjson"
_END = object()
PUMP_TASK = "skyshift-watch-pump"
#: The longest ``timeoutSeconds`` a watch may ask for (an hour; see the module docstring).
MAX_WATCH_TIMEOUT = 3600


@dataclass
class WatchOptions:
    keepalive: float = 15.0
    #: How long to wait for etcd to refuse an old resourceVersion so that the refusal can
    #: still be an HTTP 410 (only when N is older than the current revision).
    expired_grace: float = 0.5
    queue_size: int = 1024


def line(event_type: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": event_type, "object": obj}, separators=(",", ":")).encode() + b"\n"


def _parse_rv(resource_version: str | None) -> int | None:
    if resource_version in (None, "", "0"):
        return None
    assert resource_version is not None
    try:
        value = parse_revision(resource_version)
    except InvalidArgument as exc:
        raise ApiError(400, str(exc), field="resourceVersion") from None
    if value is not None and value >= MAX_REVISION:  # the watch starts at value + 1
        raise ApiError(
            400, f"resourceVersion must be below {MAX_REVISION}", field="resourceVersion"
        )
    return value


class _Pump:
    """Copies the store's watch into a queue; errors and the end travel through it too."""

    def __init__(self, events: AsyncIterator[WatchEvent], size: int) -> None:
        self._events = events
        self.queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=size)
        self.error: BaseException | None = None
        self._settled = asyncio.Event()  # set once anything (event, end, error) was queued
        self._task = asyncio.create_task(self._run(), name=PUMP_TASK)

    async def _put(self, item: Any) -> None:
        await self.queue.put(item)
        self._settled.set()

    async def _run(self) -> None:
        try:
            async for event in self._events:
                await self._put(event)
            await self._put(_END)
        except Exception as exc:
            if not isinstance(exc, StoreError):
                log.exception("watch failed")
            self.error = exc
            await self._put(exc)
        finally:
            aclose = getattr(self._events, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()

    async def early_error(self, timeout: float) -> BaseException | None:
        """The error the watch failed with before delivering anything within ``timeout``."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._settled.wait(), timeout)
        return self.error if self.queue.qsize() == 1 else None

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task


def _error_line(exc: BaseException) -> bytes:
    err = from_store(exc) if isinstance(exc, StoreError) else ApiError(500, "watch failed")
    return line("ERROR", err.body())


async def watch_response(
    store: ObjectStore,
    info: KindInfo,
    namespace: str | None,
    *,
    name: str | None = None,
    label_selector: str | None = None,
    resource_version: str | None = None,
    bookmarks: bool = False,
    timeout_seconds: int | None = None,
    options: WatchOptions | None = None,
) -> StreamingResponse:
    """Start a watch; raises ApiError (410, 400, 503) while it can still be an HTTP status."""
    opts = options or WatchOptions()
    start = _parse_rv(resource_version)
    initial: list[dict[str, Any]] = []
    if start is None:
        if name is None:
            snapshot = await store.list(info.plural, namespace, label_selector=label_selector)
            initial, start = snapshot.items, int(snapshot.resource_version)
        else:
            start = await store.revision()
            try:
                obj = await store.get(info.plural, name, namespace)
                initial = [obj]
                start = max(start, int(obj["metadata"]["resourceVersion"]))
            except NotFound:
                pass
        current = start
    else:
        current = await store.revision()
    events = store.watch(
        info.plural, namespace, name=name, from_revision=start, label_selector=label_selector
    )
    pump = _Pump(events, opts.queue_size)
    if start < current - 1:
        early = await pump.early_error(opts.expired_grace)
        if isinstance(early, StoreError):
            await pump.close()
            raise from_store(early)
    return StreamingResponse(
        _stream(pump, initial, start, info, bookmarks, timeout_seconds, opts),
        media_type=NDJSON,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _stream(
    pump: _Pump,
    initial: list[dict[str, Any]],
    start: int,
    info: KindInfo,
    bookmarks: bool,
    timeout_seconds: int | None,
    opts: WatchOptions,
) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    deadline = None if not timeout_seconds else loop.time() + timeout_seconds
    last = start
    try:
        for obj in initial:
            yield line("ADDED", obj)
        while True:
            wait = opts.keepalive
            if deadline is not None:
                wait = min(wait, deadline - loop.time())
                if wait <= 0:
                    return
            try:
                item = await asyncio.wait_for(pump.queue.get(), wait)
            except TimeoutError:
                if deadline is not None and loop.time() >= deadline:
                    return
                if bookmarks:
                    meta = {"resourceVersion": str(last)}
                    yield line(
                        "BOOKMARK", {"apiVersion": API_VERSION, "kind": info.kind, "metadata": meta}
                    )
                else:
                    yield b"\n"
                continue
            if item is _END:
                return
            if isinstance(item, BaseException):
                yield _error_line(item)
                return
            last = item.revision
            yield line(item.type, item.object)
    finally:
        await pump.close()
