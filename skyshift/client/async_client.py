"""The asyncio twin of :class:`~skyshift.client.client.SkyShiftClient`, for async tests and tools.

Same methods and results; every call is written once in :mod:`skyshift.client.calls`.
"""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from skyshift.client.base import DEFAULT_TIMEOUT, decode, parse_event
from skyshift.client.calls import (
    Calls,
    Finished,
    KindArg,
    Manifest,
    Op,
    PatchType,
    Reply,
    step,
    unreachable,
    watch_errors,
)
from skyshift.client.errors import ApiError
from skyshift.client.types import ApplyResult, DeleteResult, ExecResult, WatchEvent
from skyshift.client.waiting import (
    WATCH_PAUSE,
    WaitFor,
    deleted_while_waiting,
    parse_for,
    timed_out,
)

T = TypeVar("T")


class AsyncSkyShiftClient(Calls):
    """Async client of one API server; see :class:`SkyShiftClient` for the arguments."""

    def __init__(
        self,
        server: str | None = None,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        namespace: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        settings = self._settle(server, token, timeout, namespace)
        self._http = httpx.AsyncClient(**settings, transport=transport)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncSkyShiftClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _run(self, op: Op[T]) -> T:
        """Carry out a call (see :mod:`skyshift.client.calls`): send each request it makes."""
        reply: Reply = None
        while not isinstance(request := step(op, reply), Finished):
            try:
                reply = await self._http.request(**request.send_args())
            except httpx.TransportError as exc:
                reply = unreachable(exc, self.server)
        return request.value

    async def _call(self, method: str, path: str, **kw: Any) -> Any:
        return await self._run(self._call_op(method, path, **kw))

    async def create(self, obj: Manifest, namespace: str | None = None) -> dict[str, Any]:
        return await self._run(self._create_op(obj, namespace))

    async def get(self, kind: KindArg, name: str, namespace: str | None = None) -> dict[str, Any]:
        return await self._run(self._get_op(kind, name, namespace))

    async def list(
        self,
        kind: KindArg,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        limit: int | None = None,
        follow: bool = True,
    ) -> dict[str, Any]:
        return await self._run(self._list_op(kind, namespace, label_selector, limit, follow))

    async def update(self, obj: Manifest, namespace: str | None = None) -> dict[str, Any]:
        return await self._run(self._update_op(obj, namespace))

    async def patch(
        self,
        kind: KindArg,
        name: str,
        namespace: str | None,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        type: PatchType | None = None,
    ) -> dict[str, Any]:
        return await self._run(self._patch_op(kind, name, namespace, patch, type))

    async def delete(self, kind: KindArg, name: str, namespace: str | None = None) -> DeleteResult:
        return await self._run(self._delete_op(kind, name, namespace))

    async def apply(self, obj: Manifest, namespace: str | None = None) -> ApplyResult:
        return await self._run(self._apply_op(obj, namespace))

    async def watch(
        self,
        kind: KindArg,
        name: str | None = None,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Async generator of watch events (``async for ev in client.watch("jobs")``)."""
        args = self._watch_args(kind, name, namespace, resource_version, label_selector, timeout)
        with watch_errors(self.server):
            async with self._http.stream(**args) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    decode(resp)
                async for line in resp.aiter_lines():
                    event = parse_event(line)
                    if event is not None:
                        yield event

    async def wait(
        self,
        kind: KindArg,
        name: str,
        namespace: str | None = None,
        until: str | WaitFor = "phase=Succeeded",
        timeout: float = 60.0,
    ) -> dict[str, Any] | None:
        """See :meth:`SkyShiftClient.wait`: a phase or deletion, by watch, with a timeout."""
        cond, what = parse_for(until), self._wait_subject(kind, name)
        deadline = time.monotonic() + timeout
        try:
            last: dict[str, Any] | None = await self.get(kind, name, namespace)
        except ApiError as exc:
            if exc.not_found and cond.delete:
                return None
            raise
        while last is not None and not cond.met(last):
            left = deadline - time.monotonic()
            if left <= 0:
                raise timed_out(what, cond, timeout, last)
            rv = (last.get("metadata") or {}).get("resourceVersion")
            events = self.watch(kind, name, namespace, resource_version=rv, timeout=left)
            seen = False
            try:
                async for event in events:
                    seen = True
                    if event.type == "DELETED":
                        last = None
                    elif event.type in ("ADDED", "MODIFIED"):
                        last = event.object
                    if last is None or cond.met(last):
                        break
            finally:
                await events.aclose()
            if not seen:  # the stream ended early and empty: look again, without spinning
                await asyncio.sleep(min(WATCH_PAUSE, max(deadline - time.monotonic(), 0)))
        if last is None and not cond.delete:
            raise deleted_while_waiting(what, cond)
        return last

    async def logs(self, name: str, namespace: str | None = None, tail: int | None = None) -> str:
        return await self._run(self._logs_op(name, namespace, tail))

    async def exec(
        self,
        name: str,
        command: builtins.list[str] | tuple[str, ...],
        namespace: str | None = None,
        rank: int = 0,
    ) -> ExecResult:
        return await self._run(self._exec_op(name, command, namespace, rank))

    async def trigger_schedule(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        return await self._run(self._schedule_op(name, namespace, "trigger"))

    async def backfill_schedule(
        self, name: str, start: str, end: str, namespace: str | None = None,
        overlap: str = "AllowAll",
    ) -> dict[str, Any]:
        body = {"start": start, "end": end, "overlapPolicy": overlap}
        return await self._run(self._schedule_op(name, namespace, "backfill", body))

    async def healthz(self) -> Any:
        return await self._call("GET", "/healthz")

    async def readyz(self) -> Any:
        return await self._call("GET", "/readyz")
