"""The asyncio twin of :class:`~skyshift.client.client.SkyShiftClient`, for async tests and tools.

Same methods and results; the shared logic lives in :mod:`skyshift.client.base`.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx

from skyshift.client.base import (
    DEFAULT_TIMEOUT,
    JSON_PATCH,
    MERGE_PATCH,
    Pager,
    apply_body,
    decode,
    exec_result,
    headers_for,
    list_namespace,
    parse_event,
    resolve_target,
    watch_params,
)
from skyshift.client.client import KindArg, Manifest, PatchType
from skyshift.client.errors import ApiError, error_from_transport
from skyshift.client.paths import (
    collection_path,
    manifest_target,
    object_path,
    resolve_kind,
    selector_string,
    to_manifest,
)
from skyshift.client.types import ApplyResult, DeleteResult, ExecResult, WatchEvent


class AsyncSkyShiftClient:
    """Async client of one API server; see :class:`SkyShiftClient` for the arguments."""

    def __init__(
        self,
        server: str | None = None,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        namespace: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        target = resolve_target(server, token, namespace)
        self.server = target.server
        self.namespace = target.namespace
        self.timeout = timeout
        self._http = httpx.AsyncClient(
            base_url=self.server,
            headers=headers_for(target.token),
            timeout=timeout,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncSkyShiftClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> httpx.Response:
        content = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if content is not None else None
        try:
            return await self._http.request(
                method, path, params=params, content=content, headers=headers
            )
        except httpx.TransportError as exc:
            raise error_from_transport(exc, self.server) from exc

    async def _call(self, method: str, path: str, **kw: Any) -> Any:
        return decode(await self._send(method, path, **kw))

    async def _obj(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        data = await self._call(method, path, **kw)
        if not isinstance(data, dict):
            raise ApiError(0, "BadResponse", f"{method} {path}: expected a JSON object")
        return data

    async def create(self, obj: Manifest, namespace: str | None = None) -> dict[str, Any]:
        data = to_manifest(obj)
        info, _, ns = manifest_target(data, namespace or self.namespace)
        return await self._obj("POST", collection_path(info, ns), body=data)

    async def get(self, kind: KindArg, name: str, namespace: str | None = None) -> dict[str, Any]:
        info = resolve_kind(kind)
        return await self._obj("GET", object_path(info, name, namespace or self.namespace))

    async def list(
        self,
        kind: KindArg,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        limit: int | None = None,
        follow: bool = True,
    ) -> dict[str, Any]:
        info = resolve_kind(kind)
        path = collection_path(info, list_namespace(info, namespace, self.namespace))
        pager = Pager(info, limit, selector_string(label_selector))
        while pager.add(await self._call("GET", path, params=pager.params)) and follow:
            pass
        return pager.result(follow)

    async def update(self, obj: Manifest, namespace: str | None = None) -> dict[str, Any]:
        data = to_manifest(obj)
        info, name, ns = manifest_target(data, namespace or self.namespace)
        return await self._obj("PUT", object_path(info, name, ns), body=data)

    async def patch(
        self,
        kind: KindArg,
        name: str,
        namespace: str | None,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        type: PatchType | None = None,
    ) -> dict[str, Any]:
        info = resolve_kind(kind)
        kind_of_patch = type or ("merge" if isinstance(patch, Mapping) else "json")
        ctype = MERGE_PATCH if kind_of_patch == "merge" else JSON_PATCH
        body: Any = dict(patch) if isinstance(patch, Mapping) else [dict(op) for op in patch]
        path = object_path(info, name, namespace or self.namespace)
        return await self._obj("PATCH", path, body=body, content_type=ctype)

    async def delete(self, kind: KindArg, name: str, namespace: str | None = None) -> DeleteResult:
        info = resolve_kind(kind)
        resp = await self._send("DELETE", object_path(info, name, namespace or self.namespace))
        data = decode(resp)
        return DeleteResult(resp.status_code, data if isinstance(data, dict) else None)

    async def apply(self, obj: Manifest, namespace: str | None = None) -> ApplyResult:
        data = to_manifest(obj)
        info, name, ns = manifest_target(data, namespace or self.namespace)
        try:
            created = await self._obj("POST", collection_path(info, ns), body=data)
            return ApplyResult("created", created)
        except ApiError as exc:
            if exc.status != 409:
                raise
            try:
                current = await self.get(info.kind, name, ns)
            except ApiError:
                raise exc from None
        body = apply_body(data, current)
        if body is None:
            return ApplyResult("unchanged", current)
        updated = await self._obj("PUT", object_path(info, name, ns), body=body)
        return ApplyResult("configured", updated)

    async def watch(
        self,
        kind: KindArg,
        name: str | None = None,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Async generator of watch events (``async for ev in client.watch("jobs")``)."""
        info = resolve_kind(kind)
        ns = namespace or self.namespace
        path = (
            object_path(info, name, ns)
            if name
            else collection_path(info, list_namespace(info, namespace, self.namespace))
        )
        params = watch_params(resource_version, selector_string(label_selector), timeout)
        tmo = httpx.Timeout(self.timeout, read=timeout)
        try:
            async with self._http.stream("GET", path, params=params, timeout=tmo) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    decode(resp)
                async for line in resp.aiter_lines():
                    event = parse_event(line)
                    if event is not None:
                        yield event
        except httpx.ReadTimeout:
            return
        except httpx.TransportError as exc:
            raise error_from_transport(exc, self.server) from exc

    async def logs(self, name: str, namespace: str | None = None, tail: int | None = None) -> str:
        params = {"tail": str(tail)} if tail is not None else None
        path = object_path(resolve_kind("jobs"), name, namespace or self.namespace) + "/logs"
        data = await self._call("GET", path, params=params)
        if data is None:
            return ""
        return data if isinstance(data, str) else json.dumps(data)

    async def exec(
        self,
        name: str,
        command: builtins.list[str] | tuple[str, ...],
        namespace: str | None = None,
        rank: int = 0,
    ) -> ExecResult:
        path = object_path(resolve_kind("jobs"), name, namespace or self.namespace) + "/exec"
        body = {"command": list(command), "rank": rank}
        return exec_result(await self._call("POST", path, body=body))

    async def healthz(self) -> Any:
        return await self._call("GET", "/healthz")

    async def readyz(self) -> Any:
        return await self._call("GET", "/readyz")
