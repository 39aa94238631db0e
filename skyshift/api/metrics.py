"""Request metrics of the API server (``skyshift_api_requests_total``, ``..._duration_seconds``).

A pure ASGI middleware: it labels each request with the *route template* the router matched
(``/{namespace}/jobs/{name}``), never the raw path, so the number of series stays bounded
whatever URLs clients send; unmatched paths count as ``unmatched``. Watches are counted but left
out of the latency histogram (a watch lasts as long as the client wants). The method label is
bounded the same way: a method outside HTTP's standard ones counts as ``OTHER`` (issue 26: 20,000
requests with random methods grew the series, and the memory, without bound). The figures are served
like the workers' (``SKYSHIFT_METRICS_ADDRESS``, a separate listener: Prometheus scrapes it
without an API token), see :mod:`skyshift.workers.metrics_http`.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from skyshift.api.deps import WATCH_SCOPE_KEY
from skyshift.metrics import API_LATENCY, API_REQUESTS

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE",
                     "CONNECT"})


def method_label(scope: Scope) -> str:
    """The request's method when it is a standard one, ``OTHER`` otherwise."""
    method = scope.get("method", "GET")
    return method if method in METHODS else "OTHER"


def _route(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


def _is_watch(scope: Scope) -> bool:
    """Marked by the route that started the watch (its parsed ``watch``, not the raw query)."""
    return bool(scope.get(WATCH_SCOPE_KEY))


class MetricsMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status: dict[str, Any] = {"code": 500}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            method, route = method_label(scope), _route(scope)
            API_REQUESTS.labels(method=method, route=route, code=str(status["code"])).inc()
            if not _is_watch(scope):
                API_LATENCY.labels(method=method, route=route).observe(
                    time.perf_counter() - start
                )
