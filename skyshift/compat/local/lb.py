"""Services on a local cluster: one HAProxy (Debian's ``haproxy``) per cluster, driven through
its runtime API.

Each service gets an address of its own, like a ClusterIP: on a loopback cluster (the default,
``address: 127.0.0.1``) a free address of 127.77.0.0/16 picked from the service's name, so every
service can use port 80; on a cluster with another ``address``, that address (ports then must
not collide). For each service port there is a frontend on ``<address>:<port>`` and a backend
of ``MAX_BACKENDS`` server slots (``server-template``). Which replicas are behind it is set
through the runtime API (``set server ... addr ... port ...`` / ``state ready|maint``) without a
reload; the configuration is rewritten and HAProxy reloaded (``-sf``: no connection dropped)
only when services or their ports change, then every backend is set again. Servers are health
checked (TCP, every 500 ms), so traffic goes only to replicas that accept connections.

State lives under ``<state_dir>/lb/``: ``services.json`` (what each service wants: ports and
backends), ``haproxy.cfg``, ``haproxy.pid`` and ``admin.sock``; when the skylet is root the last
three are in HAProxy's own directory and HAProxy runs as ``skyshift-lb``, never as root
(:mod:`skyshift.compat.local.lb_run`). HAProxy runs as a daemon that outlives the skylet, like
the replicas; deleting the last service stops it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from skyshift.compat.errors import Permanent, Transient, Unsupported
from skyshift.compat.local import lb_run as local_lb_run
from skyshift.compat.types import ServicePort, ServiceSpec, ServiceStatus
from skyshift.models.meta import validate_name

log = logging.getLogger(__name__)
MAX_BACKENDS = 64
HAPROXY = "haproxy"
_LOOPBACK_NET = "127.77"
# what may reach haproxy.cfg and the runtime API: "<namespace>.<name>" of two DNS-1123 labels,
# IPv4 addresses, host names and decimal ports. Nothing else is written, whatever the caller
# checked (defense in depth: a newline or a ';' would start a directive or a command)
_DNS1123 = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_KEY = re.compile(rf"{_DNS1123}\.{_DNS1123}")
_HOST = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9.]{0,251}[A-Za-z0-9])?")


def haproxy_binary() -> str:
    found = shutil.which(HAPROXY) or next(
        (p for p in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy") if os.path.exists(p)), None)
    if found is None:
        raise Unsupported("services on local clusters need HAProxy: apt-get install haproxy")
    return found


def _key(namespace: str, name: str) -> str:
    return f"{namespace}.{name}"


class LocalBalancer:
    def __init__(self, cluster: str, state_dir: Path, address: str) -> None:
        self.cluster = cluster
        self.dir = state_dir / "lb"
        self.address = address
        run = local_lb_run.run_dir(cluster, self.dir)  # as root: HAProxy's own 0700 directory
        self.cfg = run / "haproxy.cfg"
        self.pidfile = run / "haproxy.pid"
        self.sock = run / "admin.sock"
        self.state = self.dir / "services.json"
        self._prefix: tuple[str, ...] = ()  # what starts HAProxy as its own user

    # ---- the two operations (blocking: call them in a thread) ------------------------------

    def apply(self, spec: ServiceSpec) -> ServiceStatus:
        check_spec(spec)
        binary = haproxy_binary()
        if not spec.ports:
            raise Permanent(f"service {spec.name} has no ports")
        if len(spec.ports) > 16:
            raise Permanent(f"service {spec.name}: at most 16 ports on a local cluster")
        with self._locked():
            services = self._load()
            key = _key(spec.namespace, spec.name)
            old = services.get(key)
            ip = (old or {}).get("ip") or self._pick_ip(key, services)
            ports = [{"port": p.port, "target": p.target_port or p.port} for p in spec.ports]
            backends = {str(t): sorted(set(v))[:MAX_BACKENDS]
                        for t, v in (spec.backends or {}).items()}
            entry = {"ip": ip, "ports": ports, "backends": backends}
            services[key] = entry
            reload = old is None or old.get("ports") != ports or old.get("ip") != ip
            try:
                if reload or not self._running():
                    self._write_config(services)
                    self._start_or_reload(binary)
                    for k in services:
                        self._set_servers(k, services[k])
                else:
                    self._set_servers(key, entry)
            except Permanent:
                if old is None:
                    services.pop(key)
                else:
                    services[key] = old
                self._write_config(services)
                raise
            self._save(services)
        total = sum(len(v) for v in backends.values())
        where = ", ".join(f"{ip}:{p['port']}" for p in ports)
        return ServiceStatus(
            name=spec.name, namespace=spec.namespace, cluster_ip=ip,
            ports=[ServicePort(p.port, p.target_port or p.port, 0, p.protocol)
                   for p in spec.ports],
            message=f"HAProxy on {where} in front of {total} replica addresses",
            needs_backends=True,
        )

    def delete(self, namespace: str, name: str) -> None:
        if not _KEY.fullmatch(_key(namespace, name)):
            raise Permanent(f"service {_key(namespace, name)[:80]!r}: not a namespace and name")
        if not self.dir.exists():
            return
        with self._locked():
            services = self._load()
            if services.pop(_key(namespace, name), None) is None:
                return
            self._save(services)
            if not services:
                self.stop()
                return
            self._write_config(services)
            self._start_or_reload(haproxy_binary())
            for k in services:
                self._set_servers(k, services[k])

    def forget_all(self) -> None:
        """Stop HAProxy and drop every service (the cluster is going away)."""
        if not self.dir.exists():
            return
        with self._locked():
            self.stop()
            self.state.unlink(missing_ok=True)

    def stop(self) -> None:
        pid = self._pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        self.pidfile.unlink(missing_ok=True)

    # ---- state ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.dir.mkdir(parents=True, exist_ok=True)
        with (self.dir / "lock").open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            self._prefix = local_lb_run.prepare(self.cluster, self.dir).prefix
            self._stop_legacy()
            yield

    def _stop_legacy(self) -> None:
        """A HAProxy started as root by an older skylet, with its files in the state dir."""
        old = self.dir / "haproxy.pid"
        if old == self.pidfile or not old.exists():
            return
        with contextlib.suppress(ValueError, IndexError, OSError):
            os.kill(int(old.read_text().split()[0]), signal.SIGTERM)
        old.unlink(missing_ok=True)
        (self.dir / "admin.sock").unlink(missing_ok=True)

    def _load(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self.state.read_text())
            return data
        except (FileNotFoundError, ValueError):
            return {}

    def _save(self, services: dict[str, Any]) -> None:
        tmp = self.state.with_suffix(".tmp")
        tmp.write_text(json.dumps(services, sort_keys=True))
        os.replace(tmp, self.state)

    def _pick_ip(self, key: str, services: dict[str, Any]) -> str:
        if not self.address.startswith("127."):
            return self.address
        taken = {s.get("ip") for s in services.values()}
        n = int.from_bytes(hashlib.sha256(f"{self.cluster}/{key}".encode()).digest()[:2], "big")
        for i in range(65536):
            value = (n + i) % 65534 + 1
            ip = f"{_LOOPBACK_NET}.{value >> 8}.{value & 255}"
            if ip not in taken and not ip.endswith(".0") and not ip.endswith(".255"):
                return ip
        raise Permanent(f"cluster {self.cluster}: no free service address left")

    # ---- HAProxy ----------------------------------------------------------------------------

    def _names(self, key: str, target: int) -> str:
        return f"b_{key}_{target}"

    def _write_config(self, services: dict[str, Any]) -> None:
        lines = [
            "global",
            f"    stats socket {self.sock} mode 600 level admin",
            "    maxconn 4096",
            "defaults",
            "    mode tcp",
            "    timeout connect 2s",
            "    timeout client 60s",
            "    timeout server 60s",
            "    retries 3",
            "    option redispatch",
        ]
        for key in sorted(services):
            entry = services[key]
            if (why := entry_problem(key, entry)) is not None:
                log.warning("cluster %s: service %r left out of HAProxy's configuration: %s",
                            self.cluster, key[:80], why)
                continue
            targets: set[int] = set()
            for p in entry["ports"]:
                lines += [f"frontend f_{key}_{p['port']}", f"    bind {entry['ip']}:{p['port']}",
                          f"    default_backend {self._names(key, p['target'])}"]
                targets.add(int(p["target"]))
            for target in sorted(targets):
                lines += [f"backend {self._names(key, target)}", "    balance roundrobin",
                          "    default-server check inter 500ms fall 1 rise 1",
                          f"    server-template s 1-{MAX_BACKENDS} 127.0.0.1:1 disabled"]
        self.cfg.write_text("\n".join(lines) + "\n")
        os.chmod(self.cfg, 0o644)  # HAProxy's own user reads it; it holds no secret

    def _pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().split()[0])
        except (FileNotFoundError, ValueError, IndexError):
            return None

    def _running(self) -> bool:
        pid = self._pid()
        if pid is None:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return self.sock.exists()

    def _start_or_reload(self, binary: str) -> None:
        # run in its own directory: HAProxy goes back to where it started, and its user cannot
        # enter the skylet's (a 0700 SKYSHIFT_HOME)
        check = subprocess.run([*self._prefix, binary, "-c", "-q", "-f", str(self.cfg)],
                               capture_output=True, text=True, timeout=30, cwd=self.cfg.parent)
        if check.returncode != 0:
            raise Permanent(f"HAProxy refused the configuration: {_last(check.stderr)}")
        argv = [*self._prefix, binary, "-D", "-f", str(self.cfg), "-p", str(self.pidfile)]
        if self._running() and (pid := self._pid()) is not None:
            argv += ["-sf", str(pid)]
        self.sock.unlink(missing_ok=True)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                              start_new_session=True, cwd=self.cfg.parent)
        if done.returncode != 0:
            why = _last(done.stderr)
            if "cannot bind" in why.lower() or "address already in use" in why.lower():
                raise Permanent(f"cluster {self.cluster}: the service address is taken: {why}")
            raise Transient(f"cluster {self.cluster}: HAProxy did not start: {why}")
        for _ in range(100):
            if self.sock.exists():
                return
            time.sleep(0.05)
        raise Transient(f"cluster {self.cluster}: HAProxy's runtime socket did not appear")

    def _set_servers(self, key: str, entry: dict[str, Any]) -> None:
        if entry_problem(key, entry) is not None:
            return  # left out of the configuration (see _write_config): no backend to set
        commands: list[str] = []
        for target in sorted({int(p["target"]) for p in entry["ports"]}):
            backend = self._names(key, target)
            addresses = list(entry.get("backends", {}).get(str(target), []))
            for slot in range(1, MAX_BACKENDS + 1):
                server = f"{backend}/s{slot}"
                if slot <= len(addresses):
                    host, port = split_address(addresses[slot - 1])
                    commands += [f"set server {server} addr {host} port {port}",
                                 f"set server {server} state ready"]
                else:
                    commands.append(f"set server {server} state maint")
        for i in range(0, len(commands), 32):  # a line of commands per connection
            self._runtime(";".join(commands[i:i + 32]))

    def _runtime(self, line: str) -> str:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(5)
                s.connect(str(self.sock))
                s.sendall(line.encode() + b"\n")
                out = b""
                while chunk := s.recv(65536):
                    out += chunk
        except OSError as err:
            raise Transient(f"cluster {self.cluster}: HAProxy runtime API: {err}") from err
        text = out.decode(errors="replace")
        bad = [ln for ln in text.splitlines() if "No such" in ln or "Unknown" in ln]
        if bad:
            raise Transient(f"cluster {self.cluster}: HAProxy runtime API said: {bad[0]}")
        return text


def _port_ok(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and 1 <= value <= 65535


def split_address(address: object) -> tuple[str, int]:
    """``host:port`` of a replica, checked: an IP address or a host name, and a port."""
    host, sep, port = str(address).rpartition(":")
    ok = sep and port.isascii() and port.isdigit() and _port_ok(int(port))
    if ok and not _HOST.fullmatch(host):
        try:
            ipaddress.ip_address(host)
        except ValueError:
            ok = False
    if not ok:
        raise Permanent(f"backend address {str(address)[:80]!r} is not host:port")
    return host, int(port)


def check_spec(spec: ServiceSpec) -> None:
    """Permanent unless every part of ``spec`` that reaches HAProxy is in its strict grammar."""
    try:
        validate_name(spec.name, "service name")
        validate_name(spec.namespace, "namespace")
    except ValueError as exc:
        raise Permanent(str(exc)) from None
    for p in spec.ports:
        if not _port_ok(p.port) or not (p.target_port == 0 or _port_ok(p.target_port)):
            raise Permanent(f"service {spec.name}: port {p.port!r}/{p.target_port!r} is not "
                            "in 1-65535")
    for target, addresses in (spec.backends or {}).items():
        if not (str(target).isascii() and str(target).isdigit() and _port_ok(int(target))):
            raise Permanent(f"service {spec.name}: backend port {str(target)[:20]!r}")
        for address in addresses:
            split_address(address)


def entry_problem(key: str, entry: dict[str, Any]) -> str | None:
    """Why a stored service cannot be written into haproxy.cfg as it is (None: it can)."""
    if not _KEY.fullmatch(key):
        return "not <namespace>.<name>"
    try:
        ipaddress.IPv4Address(str(entry.get("ip")))
    except ValueError:
        return f"address {str(entry.get('ip'))[:40]!r} is not an IPv4 address"
    ports = entry.get("ports") or []
    if not all(_port_ok(p.get("port")) and _port_ok(p.get("target")) for p in ports):
        return "a port is not in 1-65535"
    return None


def _last(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    alerts = [ln for ln in lines if "ALERT" in ln] or lines
    return alerts[-1][:500] if alerts else "no message"
