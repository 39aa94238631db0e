"""A worker's Prometheus endpoint: ``skyshift_*`` metrics and the Temporal SDK's own, one scrape.

Off unless ``SKYSHIFT_METRICS_ADDRESS`` (``host:port``; e.g. ``127.0.0.1:9464``) is set, so two
workers on one host never fight over a port nobody asked for. When on, the worker's Temporal
client gets a Runtime whose telemetry exports the SDK's metrics (``temporal_*``: task latencies,
slots, polls, activity and workflow outcomes) through the SDK's Prometheus exporter on a private
loopback port; ``GET /metrics`` on the configured address answers with this process's
``skyshift_*`` registry followed by that exporter's text. The server is a small threaded HTTP
server, so scrapes never run on the worker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import urllib.request
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

log = logging.getLogger(__name__)
ENV = "SKYSHIFT_METRICS_ADDRESS"


def metrics_address(env: dict[str, str] | None = None) -> tuple[str, int] | None:
    """``(host, port)`` from ``SKYSHIFT_METRICS_ADDRESS``, None when unset; ValueError if bad."""
    raw = (env if env is not None else os.environ).get(ENV, "").strip()
    if not raw:
        return None
    host, _, port = raw.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{ENV}={raw!r}: expected host:port, e.g. 127.0.0.1:9464")
    return host.strip("[]"), int(port)


def _free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sdk_runtime() -> tuple[Runtime, str]:
    """A Temporal Runtime exporting the SDK's metrics on loopback, and the URL to read them."""
    bind = f"127.0.0.1:{_free_loopback_port()}"
    runtime = Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(
        bind_address=bind, counters_total_suffix=True, durations_as_seconds=True,
    )))
    return runtime, f"http://{bind}/metrics"


class MetricsServer:
    """``GET /metrics`` (and ``/``) on ``address``, in a daemon thread."""

    def __init__(self, address: tuple[str, int], sdk_url: str = "") -> None:
        sdk = sdk_url

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] not in ("/metrics", "/"):
                    self.send_error(404, "only /metrics is served here")
                    return
                body = generate_latest(REGISTRY) + _sdk_text(sdk)
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE_LATEST)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # scrapes are not news
                return

        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        ThreadingHTTPServer.address_family = family
        self.httpd = ThreadingHTTPServer(address, Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="metrics",
                                       daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> MetricsServer:
        self.thread.start()
        log.info("metrics on http://%s:%d/metrics", self.httpd.server_address[0], self.port)
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _sdk_text(url: str) -> bytes:
    if not url:
        return b""
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bytes(resp.read())
    except OSError as exc:
        return f"# Temporal SDK metrics unavailable: {exc}\n".encode()


async def every(seconds: float, stop: asyncio.Event, step: Callable[[], Awaitable[None]]) -> None:
    """Run ``step`` now and then every ``seconds`` until ``stop``; a failing step is logged."""
    while not stop.is_set():
        try:
            await step()
        except Exception as exc:
            log.debug("metrics step failed: %s", exc)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)


def start_from_env() -> tuple[Runtime | None, MetricsServer | None]:
    """The Runtime for the worker's Temporal client and the running metrics server, or
    ``(None, None)`` when ``SKYSHIFT_METRICS_ADDRESS`` is not set."""
    address = metrics_address()
    if address is None:
        return None, None
    runtime, url = sdk_runtime()
    return runtime, MetricsServer(address, url).start()
