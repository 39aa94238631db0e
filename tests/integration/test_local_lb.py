"""A local cluster's service: Debian's HAProxy in front of real HTTP servers, driven through its
runtime API. Requests through the service address reach every backend; changing the backends
(a replica moving) changes where requests go without a failed request; deleting the last
service stops HAProxy."""

from __future__ import annotations

import http.server
import os
import pwd
import shutil
import socketserver
import stat
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from skyshift.compat.local.lb import LocalBalancer
from skyshift.compat.local.lb_run import LB_USER
from skyshift.compat.types import ServicePort, ServiceSpec
from tests.fixtures.require import require, require_binary

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


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def reaches(url: str, want: set[str], n: int = 30, timeout: float = 20.0) -> set[str]:
    """The replicas ``n`` requests reach, once they are exactly ``want`` (HAProxy's health checks
    take a few rounds to mark a new server up, longer on a loaded machine); the last set seen
    after ``timeout`` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        got = set(spread(url, n))
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


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
        assert reaches(url, {"r0", "r1"}) == {"r0", "r1"}
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
        assert reaches(url, {"r0", "r2"}) == {"r0", "r2"}
        assert int(lb.pidfile.read_text()) == pid  # same HAProxy process

        # a second service (a new frontend) reloads HAProxy seamlessly, and keeps the first's
        other = lb.apply(ServiceSpec(name="api", namespace="ml", ports=[ServicePort(80)],
                                     backends={"80": [servers["r1"]]}))
        assert other.cluster_ip != status.cluster_ip
        assert reaches(f"http://{other.cluster_ip}:80/", {"r1"}, 5) == {"r1"}
        assert set(spread(url)) == {"r0", "r2"}
        current = int(lb.pidfile.read_text())  # after the reload
        lb.delete("ml", "api")
        lb.delete("default", "web")
        # the last service gone stops HAProxy; the one before the reload ended after it (-sf)
        assert not lb.pidfile.exists()
        deadline = time.monotonic() + 10
        while alive(pid) or alive(current):
            assert time.monotonic() < deadline, f"HAProxy still runs: {pid} {current}"
            time.sleep(0.1)
    finally:
        lb.stop()


def test_haproxy_run_by_root_runs_as_its_own_user(tmp_path: Path,
                                                  servers: dict[str, str]) -> None:
    """Issue 26: a root skylet starts HAProxy (and its config check) as ``skyshift-lb`` with no
    capability but binding low ports, its socket in a directory replicas cannot enter."""
    require_binary("haproxy", "apt-get install haproxy")
    require(os.geteuid() == 0, "root (HAProxy drops to its own user only when the skylet is root)")
    lb = LocalBalancer("lb-user", tmp_path, "127.0.0.1")
    try:
        status = lb.apply(spec([servers["r0"]]))
        assert reaches(f"http://{status.cluster_ip}:80/", {"r0"}) == {"r0"}  # port 80 bound
        fields = dict(line.split(":", 1) for line in
                      Path(f"/proc/{int(lb.pidfile.read_text())}/status").read_text().splitlines())
        uid = int(fields["Uid"].split()[0])
        assert uid == pwd.getpwnam(LB_USER).pw_uid != 0
        assert int(fields["CapEff"], 16) == 1 << 10  # CAP_NET_BIND_SERVICE, nothing else
        assert lb.sock.parent.stat().st_uid == uid
        assert stat.S_IMODE(lb.sock.parent.stat().st_mode) == 0o700
        assert not str(lb.sock).startswith(str(tmp_path))  # not in the state dir
    finally:
        lb.stop()
        shutil.rmtree(lb.sock.parent, ignore_errors=True)
