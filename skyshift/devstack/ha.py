"""``skyshift up --ha``: the production topology (docs/production.md) on one machine.

Three etcd members with client auth and TLS (clients and peers show certificates of
``$SKYSHIFT_HOME/pki/etcd``), the Temporal server (scripts/build-temporal.sh) with an mTLS
frontend on SQLite, the Temporal UI server with a client certificate of its own, two API
replicas behind one HAProxy (the CLI talks to HAProxy), two control workers and two skylet
managers, every SkyShift process connecting to Temporal with the client certificate of
``$SKYSHIFT_HOME/pki`` and to etcd with that of ``pki/etcd``. Ports follow from :class:`Ports`:

- etcd member i (1..3): client ``etcd + i - 1``, peer ``etcd_peer + i - 1``
- PostgreSQL: ``postgres`` (with the store ``postgres`` only)
- Temporal: frontend ``temporal``, the server's other services and membership the 8 after it
- the Temporal UI: ``ui``
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
from skyshift.devstack.ha_temporal import server_binaries, server_ports, temporal_component
from skyshift.devstack.postgres import postgres_component
from skyshift.devstack.temporal_pki import Pki, ensure_pki
from skyshift.devstack.temporal_ui import UI_CLIENT, ui_component

MEMBERS = 3
REPLICAS = 2
#: processes serving metrics, in port order
HA_METRICS = tuple(f"{p}-{i}" for p in ("api", "control", "skylet-manager")
                   for i in range(1, REPLICAS + 1))  # fmt: skip
#: the label that picks the second skylet manager; the first serves every other cluster
MANAGER_LABEL = "skyshift.io/skylet-manager"
#: Temporal's store (``--temporal-db``): the stack's PostgreSQL, or SQLite in a file
TEMPORAL_DBS = ("postgres", "sqlite")


def etcd_endpoints(ports: Ports) -> str:
    return ",".join(f"{LOOPBACK}:{ports.etcd + i}" for i in range(MEMBERS))


def all_ports(ports: Ports, temporal_db: str = "postgres") -> list[int]:
    """Every port the HA stack listens on."""
    out = [ports.etcd + i for i in range(MEMBERS)] + [ports.etcd_peer + i for i in range(MEMBERS)]
    out += [ports.postgres] if temporal_db == "postgres" else []
    out += server_ports(ports.temporal) + [ports.ui] + [ports.api + i for i in range(REPLICAS + 1)]
    if ports.metrics:
        out += [ports.metrics + i for i in range(len(HA_METRICS))]
    if len(set(out)) != len(out) or max(out) > 65535:
        raise StackError(f"the --ha ports overlap or pass 65535 ({_layout()}): {sorted(out)}")
    return out


def _layout() -> str:
    return (f"etcd members take --etcd-port and --etcd-peer-port and the {MEMBERS - 1} after "
            "each, Temporal --temporal-port and 8 after it, its UI --ui-port, the API --api-port "
            f"and {REPLICAS} after it, PostgreSQL --postgres-port")  # fmt: skip


def etcd_pki(home: Path, make: bool = False) -> Pki:
    """etcd's CA (its own: a Temporal certificate does not open etcd), the members' certificate
    and the client certificate; ``make``: made first when missing."""
    d = home / "pki" / "etcd"
    return ensure_pki(d, ca_name="skyshift-etcd-ca") if make else Pki.under(d)


def _etcd_members(home: Path, ports: Ports, resolve: bool, pki: Pki) -> list[Component]:
    names = [f"etcd-{i + 1}" for i in range(MEMBERS)]
    cluster = ",".join(f"{n}=https://{LOOPBACK}:{ports.etcd_peer + i}"
                       for i, n in enumerate(names))  # fmt: skip
    tls = pki.etcd_tls()
    out = []
    for i, name in enumerate(names):
        spec = EtcdMember(name, name, ports.etcd + i, ports.etcd_peer + i, cluster,
                          home / name)  # fmt: skip
        url = f"https://{LOOPBACK}:{spec.client}"
        last = i == MEMBERS - 1
        # etcd serves clients only once a quorum has a leader: the first members count as up
        # while they run, the last one once the cluster is healthy (then auth is turned on)
        health: Health = HttpHealth(f"{url}/health", True, tls) if last else ProcessHealth()
        hook: Callable[[], str] | None = None
        if last:
            hook = lambda: ensure_auth(home, etcd_endpoints(ports), tls)  # noqa: E731
        out.append(etcd_component(home, spec, health, resolve, hook, pki))
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
    connection is retried on the other replica, and so is a GET or HEAD whose replica closed
    the connection without answering (it died with the request: reads are safe to send again;
    a write is never sent twice, its client sees the connection close). Every request gets a
    connection of its own to its replica (loopback: cheap), so none is sent on an idle
    connection of a replica that died since: it is refused and goes to the other one.

    A replica busy with a burst answers its check late, not never: the check waits up to 5 s
    (its own etcd probe gives up after 2 s) and three in a row must fail. At one second each
    (HAProxy's default timeout) and two, the replica left after its peer's kill in a 500-job
    burst (bench/ha_faults.py) was taken out of the pool for a moment, and two list requests
    got HAProxy's 503. A dead replica still refuses connections at once (no wait), and each
    request it refuses goes to the other one."""
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
    retry-on conn-failure empty-response
    http-request disable-l7-retry if !METH_GET
    http-reuse never
    option httpchk GET /readyz?exclude=temporal
    timeout check 5s
    default-server inter 1s fall 3 rise 2
{servers}
"""


def _replica(home: Path, ports: Ports, spec: PythonProcess, i: int, pki: Pki,
             etcd: Pki) -> Component:  # fmt: skip
    name = f"{spec.name}-{i}"
    listens: dict[str, int] = {}
    env = {"SKYSHIFT_ETCD": etcd_endpoints(ports), **pki.client_env(), **etcd.etcd_tls().env()}
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
    home: Path, ports: Ports, resolve: bool = True, info: Callable[[str], None] = print,
    temporal_db: str = "postgres",
) -> list[Component]:
    """The HA stack in start order (``down`` goes in reverse), Temporal on ``temporal_db``."""
    all_ports(ports, temporal_db)
    pki = ensure_pki(home / "pki", clients=(UI_CLIENT,)) if resolve else Pki.under(home / "pki")
    etcd = etcd_pki(home, make=resolve)
    binaries = server_binaries(info) if resolve else None
    specs = {spec.name: spec for spec in python_processes(ports)}
    api = [_replica(home, ports, specs["api"], i, pki, etcd) for i in range(1, REPLICAS + 1)]
    workers = [_replica(home, ports, specs[n], i, pki, etcd)
               for n in ("control", "skylet-manager") for i in range(1, REPLICAS + 1)]  # fmt: skip
    store: list[Component] = []
    if temporal_db == "postgres":  # temporal-sql-tool is built beside temporal-server
        tools = Path(binaries.server).parent if binaries else None
        store.append(postgres_component(home, ports.postgres, tools))
    pg_port = ports.postgres if store else 0
    server = binaries.server if binaries else None
    return [
        *_etcd_members(home, ports, resolve, etcd),
        *store,
        temporal_component(home, ports.temporal, pki, server, pg_port),
        ui_component(home, ports, pki, binaries.ui if binaries else None),
        *api,
        _haproxy(home, ports, resolve),
        *workers,
    ]
