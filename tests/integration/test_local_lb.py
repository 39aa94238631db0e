"""A local cluster's service: Debian's HAProxy in front of real HTTP servers, driven through its
runtime API. Requests through the service address reach every backend; changing the backends
(a replica moving) changes where requests go without a failed request; deleting the last
service stops HAProxy."""

from __future__ import annotations

import http.server
import os
import socketserver
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from skyshift.compat.local_lb import LocalBalancer
from skyshift.compat.types import ServicePort, ServiceSpec
from tests.fixtures.require import require_binary

pytestmark = pytest.mark.integration


class Named(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = self.server.name.encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def serve(name: str) -> tuple[socketserver.TCPServer, str]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Named)
    server.name = name  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def servers() -> Iterator[dict[str, str]]:
    started = {n: serve(n) for n in ("r0", "r1", "r2")}
    yield {n: addr for n, (_, addr) in started.items()}
    for server, _ in started.values():
        server.shutdown()
        server.server_close()


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return str(resp.read().decode())


def spread(url: str, n: int = 30) -> Counter[str]:
    return Counter(get(url) for _ in range(n))


def spec(backends: list[str]) -> ServiceSpec:
    return ServiceSpec(name="web", namespace="default", ports=[ServicePort(80, 8080)],
                       backends={"8080": backends})


def test_haproxy_balances_and_follows_backends(tmp_path: Path,
                                               servers: dict[str, str]) -> None:
    require_binary("haproxy", "apt-get install haproxy")
    lb = LocalBalancer("lb-test", tmp_path, "127.0.0.1")
    try:
        status = lb.apply(spec([servers["r0"], servers["r1"]]))
        assert status.cluster_ip.startswith("127.77.")
        url = f"http://{status.cluster_ip}:80/"
        time.sleep(1.2)  # the first health checks
        assert set(spread(url)) == {"r0", "r1"}
        pid = int(lb.pidfile.read_text())

        # a replica moves: r1 goes, r2 comes; set through the runtime API, no reload
        failures = 0
        stop = threading.Event()

        def hammer() -> None:
            nonlocal failures
            while not stop.is_set():
                try:
                    get(url)
                except OSError:
                    failures += 1

        worker = threading.Thread(target=hammer)
        worker.start()
        lb.apply(spec([servers["r0"], servers["r2"]]))
        time.sleep(1.5)
        stop.set()
        worker.join()
        assert failures == 0
        assert set(spread(url)) == {"r0", "r2"}
        assert int(lb.pidfile.read_text()) == pid  # same HAProxy process

        # a second service (a new frontend) reloads HAProxy seamlessly, and keeps the first's
        other = lb.apply(ServiceSpec(name="api", namespace="ml", ports=[ServicePort(80)],
                                     backends={"80": [servers["r1"]]}))
        assert other.cluster_ip != status.cluster_ip
        time.sleep(1.2)
        assert set(spread(url)) == {"r0", "r2"}
        assert set(spread(f"http://{other.cluster_ip}:80/", 5)) == {"r1"}
        lb.delete("ml", "api")
        lb.delete("default", "web")
        time.sleep(0.5)
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        assert not lb.pidfile.exists()
    finally:
        lb.stop()
