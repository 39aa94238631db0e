"""``skyshift up --ha``: the production topology (docs/production.md) on one machine.

Three etcd members with client auth, the Temporal server (scripts/build-temporal.sh) with an
mTLS frontend on SQLite, two API replicas behind one HAProxy (the CLI talks to HAProxy), two
control workers and two skylet managers, every SkyShift process connecting to Temporal with the
client certificate of ``$SKYSHIFT_HOME/pki``. Ports follow from :class:`Ports`:

- etcd member i (1..3): client ``etcd + i - 1``, peer ``etcd_peer + i - 1``
- Temporal: frontend ``temporal``, the server's other services and membership the 8 after it
- HAProxy ``api``; API replica i: ``api + i``
- metrics (unless off): ``metrics`` and the 5 after it, in :data:`HA_METRICS` order
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from skyshift.devstack.components import (
    LOOPBACK,
    Component,
    EtcdMember,
    Health,
    HttpHealth,
    Ports,
    ProcessHealth,
    PythonProcess,
    StackError,
    etcd_component,
    python_component,
    python_processes,
)
from skyshift.devstack.etcd_auth import ensure_auth
from skyshift.devstack.ha_temporal import server_binary, server_ports, temporal_component
from skyshift.devstack.temporal_pki import Pki, ensure_pki

MEMBERS = 3
REPLICAS = 2
#: processes serving metrics, in port order
HA_METRICS = tuple(f"{p}-{i}" for p in ("api", "control", "skylet-manager")
                   for i in range(1, REPLICAS + 1))  # fmt: skip
#: the label that picks the second skylet manager; the first serves every other cluster
MANAGER_LABEL = "skyshift.io/skylet-manager"


def etcd_endpoints(ports: Ports) -> str:
    return ",".join(f"{LOOPBACK}:{ports.etcd + i}" for i in range(MEMBERS))


def all_ports(ports: Ports) -> list[int]:
    """Every port the HA stack listens on."""
    out = [ports.etcd + i for i in range(MEMBERS)] + [ports.etcd_peer + i for i in range(MEMBERS)]
    out += server_ports(ports.temporal) + [ports.api + i for i in range(REPLICAS + 1)]
    if ports.metrics:
        out += [ports.metrics + i for i in range(len(HA_METRICS))]
    if len(set(out)) != len(out) or max(out) > 65535:
        raise StackError(f"the --ha ports overlap or pass 65535 ({_layout()}): {sorted(out)}")
    return out


def _layout() -> str:
    return (f"etcd members take --etcd-port and --etcd-peer-port and the {MEMBERS - 1} after "
            "each, Temporal --temporal-port and 8 after it, the API --api-port and "
            f"{REPLICAS} after it")  # fmt: skip


def _etcd_members(home: Path, ports: Ports, resolve: bool) -> list[Component]:
    names = [f"etcd-{i + 1}" for i in range(MEMBERS)]
    cluster = ",".join(f"{n}=http://{LOOPBACK}:{ports.etcd_peer + i}" for i, n in enumerate(names))
    out = []
    for i, name in enumerate(names):
        spec = EtcdMember(name, name, ports.etcd + i, ports.etcd_peer + i, cluster,
                          home / name)  # fmt: skip
        url = f"http://{LOOPBACK}:{spec.client}"
        last = i == MEMBERS - 1
        # etcd serves clients only once a quorum has a leader: the first members count as up
        # while they run, the last one once the cluster is healthy (then auth is turned on)
        health: Health = HttpHealth(f"{url}/health", etcd_json=True) if last else ProcessHealth()
        hook: Callable[[], str] | None = None
        if last:
            hook = lambda: ensure_auth(home, etcd_endpoints(ports))  # noqa: E731
        out.append(etcd_component(home, spec, health, resolve, hook))
    return out


def _haproxy(home: Path, ports: Ports, resolve: bool) -> Component:
    d = home / "haproxy"
    cfg = d / "haproxy.cfg"
    if resolve:
        d.mkdir(parents=True, exist_ok=True)
        cfg.write_text(haproxy_config(ports))
    binary = shutil.which("haproxy") if resolve else "haproxy"
    if binary is None:
        raise StackError("HAProxy is not on PATH: `apt-get install haproxy` (needed for --ha)")
    url = f"http://{LOOPBACK}:{ports.api}"
    return Component(
        name="haproxy", title="HAProxy (API)", argv=[binary, "-f", str(cfg), "-db"], env={},
        health=HttpHealth(f"{url}/readyz"), address=url, listens={"API": ports.api},
        timeout=30.0, home=home, data_dirs=[d],
    )  # fmt: skip


def haproxy_config(ports: Ports) -> str:
    """Round robin over the replicas that answer /readyz?exclude=temporal (every replica loses
    Temporal at once and each still serves, so Temporal must not empty the pool); a refused
    connection is retried on the other replica (only connection failures: a request is never
    sent twice)."""
    servers = "\n".join(
        f"    server api-{i} {LOOPBACK}:{ports.api + i} check" for i in range(1, REPLICAS + 1)
    )
    return f"""global
    maxconn 2048
defaults
    mode http
    timeout connect 2s
    timeout client 1h
    timeout server 1h
    retries 3
    option redispatch
frontend api
    bind {LOOPBACK}:{ports.api}
    option forwardfor
    default_backend api
backend api
    balance roundrobin
    option httpchk GET /readyz?exclude=temporal
    default-server inter 1s fall 2 rise 2
{servers}
"""


def _replica(home: Path, ports: Ports, spec: PythonProcess, i: int, pki: Pki) -> Component:
    name = f"{spec.name}-{i}"
    listens: dict[str, int] = {}
    env = {"SKYSHIFT_ETCD": etcd_endpoints(ports), **pki.client_env()}
    address = spec.address
    health = spec.health
    if spec.name == "api":
        port = ports.api + i
        address = f"http://{LOOPBACK}:{port}"
        health = HttpHealth(f"{address}/readyz")
        listens["API"] = port
        env |= {"SKYSHIFT_API_PORT": str(port), "SKYSHIFT_TRUSTED_PROXIES": LOOPBACK}
    if spec.name == "skylet-manager":
        env["SKYSHIFT_SKYLET_SELECTOR"] = (
            f"{MANAGER_LABEL}=2" if i == 2 else (f"{MANAGER_LABEL}!=2")
        )
    metrics = ports.metrics + HA_METRICS.index(name) if ports.metrics else None
    replica = PythonProcess(name, f"{spec.title} {i}", spec.module, address, health, listens)
    return python_component(home, ports, replica, env, metrics)


def build_ha_components(
    home: Path, ports: Ports, resolve: bool = True, info: Callable[[str], None] = print
) -> list[Component]:
    """The HA stack in start order (``down`` goes in reverse)."""
    all_ports(ports)
    pki = ensure_pki(home / "pki") if resolve else Pki.under(home / "pki")
    binary = server_binary(info) if resolve else None
    specs = {spec.name: spec for spec in python_processes(ports)}
    api = [_replica(home, ports, specs["api"], i, pki) for i in range(1, REPLICAS + 1)]
    workers = [_replica(home, ports, specs[n], i, pki)
               for n in ("control", "skylet-manager") for i in range(1, REPLICAS + 1)]  # fmt: skip
    return [
        *_etcd_members(home, ports, resolve),
        temporal_component(home, ports.temporal, pki, binary),
        *api,
        _haproxy(home, ports, resolve),
        *workers,
    ]
