"""The asyncio twin of :class:`~skyshift.client.client.SkyShiftClient`, for async tests and tools.

Same methods and results; every call is written once in :mod:`skyshift.client.calls`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

from skyshift.client import calls
from skyshift.client.base import decode, parse_event
from skyshift.client.calls import Calls, KindArg, Op
from skyshift.client.types import WatchEvent
from skyshift.client.waiting import Follow, Pause

T = TypeVar("T")
P = ParamSpec("P")


def _awaiting(
    op: Callable[Concatenate[Calls[Any], P], Op[T]],
) -> Callable[Concatenate[AsyncSkyShiftClient, P], Awaitable[T]]:
    """The coroutine method that carries out the call ``op``."""

    async def method(self: AsyncSkyShiftClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(op(self, *args, **kwargs))

    return calls.public_method(method, op)


class AsyncSkyShiftClient(Calls[httpx.AsyncBaseTransport]):
    """Async client of one API server; see :class:`SkyShiftClient` for the arguments."""

    def _connect(
        self, settings: dict[str, Any], transport: httpx.AsyncBaseTransport | None
    ) -> None:
        self._http = httpx.AsyncClient(**settings, transport=transport)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncSkyShiftClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _run(self, op: Op[T]) -> T:
        """Carry out a call (see :mod:`skyshift.client.calls`): take each step it asks for."""
        reply: calls.Reply = None
        while not isinstance(request := calls.step(op, reply), calls.Finished):
            reply = await self._take(request)
        return request.value

    async def _take(self, request: calls.Step) -> calls.Reply:
        if isinstance(request, Pause):
            await asyncio.sleep(request.seconds)
        elif isinstance(request, Follow):
            events = self.watch(**request.watch_args)
            try:
                async for event in events:
                    if request.take(event):
                        break
            finally:
                await events.aclose()
        else:
            try:
                return await self._http.request(**request.send_args())
            except httpx.TransportError as exc:
                return calls.unreachable(exc, self.server)
        return None

    async def _call(self, method: str, path: str, **kw: Any) -> Any:
        return await self._run(self._call_op(method, path, **kw))

    # -- calls: each is written once in skyshift.client.calls ---------------------------------

    create = _awaiting(Calls._create_op)
    get = _awaiting(Calls._get_op)
    list = _awaiting(Calls._list_op)
    update = _awaiting(Calls._update_op)
    patch = _awaiting(Calls._patch_op)
    delete = _awaiting(Calls._delete_op)
    apply = _awaiting(Calls._apply_op)
    wait = _awaiting(Calls._wait_op)
    logs = _awaiting(Calls._logs_op)
    exec = _awaiting(Calls._exec_op)
    trigger_schedule = _awaiting(Calls._trigger_schedule_op)
    backfill_schedule = _awaiting(Calls._backfill_schedule_op)
    healthz = _awaiting(Calls._healthz_op)
    readyz = _awaiting(Calls._readyz_op)

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
        with calls.watch_errors(self.server):
            async with self._http.stream(**args) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    decode(resp)
                async for line in resp.aiter_lines():
                    event = parse_event(line)
                    if event is not None:
                        yield event
