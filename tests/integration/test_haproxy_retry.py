"""The HA stack's HAProxy config (skyshift/devstack/ha.py) in a real HAProxy before two HTTP
servers, one of which closes the connection of every request to ``/jobs`` without answering
(an API replica killed with the request): a GET is answered by the other server every time,
a POST is never sent twice (its client sees the connection close or HAProxy's 502)."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from skyshift.devstack.components import Ports
from skyshift.devstack.ha import haproxy_config
from tests.fixtures.ports import free_port_run
from tests.fixtures.procs import stop
from tests.fixtures.require import require

SEEN: Counter[str] = Counter()


def _handler(name: str, dies: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            if self.path.startswith("/readyz"):
                self._send(b"ok")
                return
            SEEN[f"{name} {self.command}"] += 1
            if dies:
                self.close_connection = True
                self.connection.close()  # no status line: the replica died with it
                return
            self._send(name.encode())

        def _send(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._answer()

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture()
def balancer(tmp_path: Path) -> Iterator[str]:
    binary = shutil.which("haproxy")
    require(binary is not None, "HAProxy (apt-get install haproxy)")
    assert binary is not None
    port = free_port_run(3)
    servers = [
        ThreadingHTTPServer(("127.0.0.1", port + i), _handler(f"api-{i}", dies=i == 1))
        for i in (1, 2)
    ]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(haproxy_config(Ports(api=port)))
    proc = subprocess.Popen([binary, "-f", str(cfg), "-db"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while not _ready(url):  # both servers up in HAProxy (rise 2, checks every second)
            assert time.monotonic() < deadline, "HAProxy never passed a request"
            time.sleep(0.3)
        time.sleep(2.5)  # "rise 2" at "inter 1s": until both servers count as up
        SEEN.clear()
        yield url
    finally:
        stop(proc)
        for server in servers:
            server.shutdown()
            server.server_close()


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_get_whose_replica_dies_is_answered_by_the_other(balancer: str) -> None:
    for _ in range(8):  # round robin: about half go to the dying server first
        r = httpx.get(f"{balancer}/jobs", timeout=10)
        assert r.status_code == 200 and r.text == "api-2"
    assert SEEN["api-1 GET"] >= 1, "no GET reached the dying server: the test proves nothing"


def test_a_post_is_never_sent_twice(balancer: str) -> None:
    failed = 0
    for _ in range(8):
        try:
            r = httpx.post(f"{balancer}/jobs", content=b"{}", timeout=10)
        except httpx.HTTPError:
            failed += 1
            continue
        if r.status_code >= 500:
            failed += 1
        else:
            assert r.text == "api-2"
    assert failed == SEEN["api-1 POST"] >= 1
    assert SEEN["api-2 POST"] == 8 - failed
