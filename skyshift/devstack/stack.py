"""``up``, ``down`` and ``status`` of the embedded stack, independent of how they are displayed.

State lives in ``$SKYSHIFT_HOME``: ``stack.json`` (ports, and per component the pid, start time
and argv it was started with), ``run/<name>.pid``, ``logs/<name>.log``. Commands report through a
:class:`Reporter` so the CLI can draw spinners while tests and scripts get plain lines.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from skyshift.config import Settings
from skyshift.devstack import firewall, health, metrics_targets, procs
from skyshift.devstack.components import (
    LOOPBACK,
    Component,
    Ports,
    StackError,
    build_components,
    module_installed,
)
from skyshift.devstack.etcd_auth import secure_home
from skyshift.devstack.ha import build_ha_components, etcd_endpoints, etcd_pki
from skyshift.devstack.ha_temporal import sqlite_file
from skyshift.devstack.local import stop_balancers, stop_replicas, work_roots

STATE_FILE = "stack.json"
DEFAULT_GRACE = 10.0

# --- state ---------------------------------------------------------------------------------


@dataclass
class StackState:
    home: Path
    ports: Ports
    components: dict[str, dict[str, Any]] = field(default_factory=dict)
    mode: str = "single"  # or "ha" (`up --ha`)
    temporal_db: str = "postgres"  # Temporal's store under `up --ha` (ha.TEMPORAL_DBS)

    @classmethod
    def load(cls, home: Path) -> StackState | None:
        path = home / STATE_FILE
        try:
            raw = json.loads(path.read_text())
            ports = Ports(**{k: int(v) for k, v in raw["ports"].items() if k in Ports().as_dict()})
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StackError(f"{path} is unreadable ({exc}); remove it") from None
        mode = "ha" if raw.get("mode") == "ha" else "single"
        # a stack.json from before --temporal-db ran Temporal on SQLite
        db = "postgres" if raw.get("temporal_db") == "postgres" else "sqlite"
        return cls(home=home, ports=ports, components=dict(raw.get("components") or {}),
                   mode=mode, temporal_db=db)  # fmt: skip

    def _ports_used(self) -> dict[str, int]:
        """The ports of the processes this stack runs (PostgreSQL's only under ``up --ha`` on
        it: a single-node stack listing a port nothing listens on would mislead)."""
        ports = self.ports.as_dict()
        if self.mode != "ha" or self.temporal_db != "postgres":
            ports.pop("postgres", None)
        return ports

    def save(self) -> None:
        data = {
            "home": str(self.home),
            "mode": self.mode,
            "temporal_db": self.temporal_db,
            "ports": self._ports_used(),
            "urls": urls(self.ports, self.home, self.mode, self.temporal_db),
            "components": self.components,
        }
        self.home.mkdir(parents=True, exist_ok=True)
        tmp = self.home / f"{STATE_FILE}.tmp"
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, self.home / STATE_FILE)


def urls(ports: Ports, home: Path, mode: str = "single",
         temporal_db: str = "postgres") -> dict[str, str]:  # fmt: skip
    """Where each part listens (the table ``up`` prints, and ``stack.json["urls"]``)."""
    if mode == "ha":
        store = (
            f"PostgreSQL {LOOPBACK}:{ports.postgres} (databases temporal, temporal_visibility)"
            if temporal_db == "postgres"
            else f"SQLite {sqlite_file(home)}"
        )
        return {
            "etcd": f"{etcd_endpoints(ports)} (TLS, certificates in {etcd_pki(home).ca.parent})",
            "temporal": f"{LOOPBACK}:{ports.temporal} (mTLS, certificates in {home / 'pki'})",
            "temporal_store": store,
            "temporal_ui": f"http://{LOOPBACK}:{ports.ui}",
            "api": f"http://{LOOPBACK}:{ports.api}",
            "docs": f"http://{LOOPBACK}:{ports.api}/docs",
            "logs": str(home / "logs"),
        }
    return {
        "etcd": f"http://{LOOPBACK}:{ports.etcd}",
        "temporal": f"{LOOPBACK}:{ports.temporal}",
        "temporal_ui": f"http://{LOOPBACK}:{ports.ui}",
        "api": f"http://{LOOPBACK}:{ports.api}",
        "docs": f"http://{LOOPBACK}:{ports.api}/docs",
        "logs": str(home / "logs"),
    }


# Environment variables of skyshift.config.Settings that also decide a port.
_SETTINGS_ENV = {
    "etcd": "SKYSHIFT_ETCD",
    "temporal": "SKYSHIFT_TEMPORAL_ADDRESS",
    "ui": "SKYSHIFT_TEMPORAL_UI",
    "api": "SKYSHIFT_API_PORT",
}


def resolve_ports(flags: dict[str, int | None], recorded: Ports | None) -> Ports:
    """Flags (or their SKYSHIFT_*_PORT variables) beat Settings variables (SKYSHIFT_ETCD, ...),
    which beat the ports of the last run, which beat the defaults."""
    try:
        from_env = Ports.from_settings(Settings.from_env())
    except ValueError as exc:
        raise StackError(f"bad SkyShift address in the environment: {exc}") from None
    base = recorded or Ports.from_settings(Settings(home=Path(".")))
    chosen = base.as_dict()
    for name, env_name in _SETTINGS_ENV.items():
        if os.environ.get(env_name):
            chosen[name] = getattr(from_env, name)
    if recorded is None and chosen["etcd"] != base.etcd:
        chosen["etcd_peer"] = chosen["etcd"] + 10
    for name, value in flags.items():
        if value is not None:
            chosen[name] = value
    ports = Ports(**chosen)
    # PostgreSQL's port is checked by --ha's own layout (ha.all_ports), the only mode that uses
    # it: a single-node stack whose metrics ports run over it must not be refused
    values = ports.in_use(postgres=False)
    if len(set(values)) != len(values):
        raise StackError(f"ports must all differ (metrics take {len(ports.metrics_ports())} from "
                         f"--metrics-port on), got {ports.as_dict()}")
    if values and max(values) > 65535:
        raise StackError(f"metrics ports run past 65535 from --metrics-port {ports.metrics}")
    return ports


@contextlib.contextmanager
def locked(home: Path) -> Iterator[None]:
    """One ``up``/``down`` at a time per home."""
    (home / "run").mkdir(parents=True, exist_ok=True)
    with (home / "run" / "stack.lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --- reporting -----------------------------------------------------------------------------


class Reporter(Protocol):
    def info(self, message: str) -> None: ...
    def skipped(self, component: Component, why: str) -> None: ...
    def begin(self, component: Component, pid: int, reused: bool) -> None: ...
    def progress(self, component: Component, elapsed: float, detail: str) -> None: ...
    def end(self, component: Component, ok: bool, elapsed: float, reused: bool) -> None: ...


# --- up ------------------------------------------------------------------------------------


def _running_pid(component: Component, record: dict[str, Any] | None) -> tuple[int | None, bool]:
    """(pid, stale): the pid of our live process, or whether a stale pid file was there."""
    pid = procs.read_pid(component.pid_file)
    if pid is None:
        return None, False
    ticks = record.get("start_ticks") if record and record.get("pid") == pid else None
    if record is None or record.get("pid") != pid:
        # Not started by the recorded run: trust it only if it runs the same command.
        cmdline = Path(f"/proc/{pid}/cmdline")
        try:
            argv = cmdline.read_bytes().decode(errors="replace").split("\0")[:-1]
        except OSError:
            argv = None
        if argv is not None and argv[1:] != component.argv[1:]:
            return None, True
    if procs.is_ours(pid, ticks):
        return pid, False
    return None, True


def _wait_healthy(
    component: Component,
    pid: int,
    started_at: float,
    timeout: float,
    reporter: Reporter,
    proc: Any = None,
) -> float:
    t0 = time.monotonic()
    delay = 0.1
    detail = "starting"
    while True:
        elapsed = time.monotonic() - t0
        exited = proc.poll() if proc is not None else None
        if exited is not None or not procs.alive(pid):
            how = f"exited with code {exited}" if exited is not None else "exited"
            raise _failure(component, f"{component.title} {how} before becoming healthy")
        result = health.check(component, started_at)
        if result.ok:
            return time.monotonic() - t0
        detail = result.detail
        reporter.progress(component, elapsed, detail)
        if elapsed >= timeout:
            raise _failure(
                component,
                f"{component.title} was not healthy after {timeout:.0f}s ({detail})",
            )
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)


def _failure(component: Component, message: str) -> StackError:
    log_tail = procs.tail(component.log)
    extra = f"\nlast lines of {component.log}:\n{log_tail}" if log_tail else ""
    return StackError(f"{message}; see {component.log}{extra}")


def _check_ports_free(component: Component) -> None:
    for what, port in component.listens.items():
        if health.port_open(LOOPBACK, port):
            flag = {"etcd client": "--etcd-port", "etcd peer": "--etcd-peer-port",
                    "Temporal gRPC": "--temporal-port", "Temporal UI": "--ui-port",
                    "API": "--api-port", "metrics": "--metrics-port (or --no-metrics)",
                    "PostgreSQL": "--postgres-port",
                    }.get(what, "")  # fmt: skip
            hint = f"; choose another with {flag}" if flag else ""
            raise StackError(f"port {port} ({what}) is already in use by another process{hint}")


def _after_healthy(component: Component, reporter: Reporter) -> None:
    if component.on_healthy is not None:
        line = component.on_healthy()
        if line:
            reporter.info(line)


@dataclass
class UpResult:
    ports: Ports
    started: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    urls: dict[str, str] = field(default_factory=dict)
    #: component name -> the URL Prometheus scrapes ({} with metrics off)
    metrics: dict[str, str] = field(default_factory=dict)


def _reuse(component: Component, pid: int, record: dict[str, Any] | None, limit: float,
           reporter: Reporter) -> None:
    """Wait for a component that already runs, refusing one started with other settings."""
    recorded_argv = (record or {}).get("argv")
    recorded_env = (record or {}).get("env")  # absent: started by an older `up`
    if recorded_argv and (
        recorded_argv[1:] != component.argv[1:]
        or (component.env and recorded_env != component.env)
    ):
        raise StackError(
            f"{component.name} is running (pid {pid}) with other settings; "
            "run `skyshift down` first"
        )
    reporter.begin(component, pid, True)
    started_at = float((record or {}).get("started_at") or 0.0)
    elapsed = _wait_healthy(component, pid, started_at, limit, reporter)
    reporter.end(component, True, elapsed, True)
    _after_healthy(component, reporter)


def _start(component: Component, state: StackState, limit: float, reporter: Reporter) -> None:
    """Start a component and wait until it is healthy; stop it again if it never is."""
    _check_ports_free(component)
    component.ready_file.unlink(missing_ok=True)
    for path in component.data_dirs:
        path.mkdir(parents=True, exist_ok=True)
    proc = procs.spawn(
        component.argv, component.env, component.log, cwd=state.home, drop=component.env_drop
    )
    started_at = time.time()
    procs.write_pid(component.pid_file, proc.pid)
    state.components[component.name] = {
        "pid": proc.pid,
        "start_ticks": procs.start_ticks(proc.pid),
        "started_at": started_at,
        "argv": component.argv,
        "env": component.env,
        "address": component.address,
        "log": str(component.log),
    }
    state.save()
    reporter.begin(component, proc.pid, False)
    t0 = time.monotonic()
    try:
        elapsed = _wait_healthy(component, proc.pid, started_at, limit, reporter, proc)
    except StackError:
        reporter.end(component, False, time.monotonic() - t0, False)
        procs.stop_group(proc.pid, grace=5.0)
        proc.poll()
        component.pid_file.unlink(missing_ok=True)
        state.components.pop(component.name, None)
        state.save()
        raise
    reporter.end(component, True, elapsed, False)
    _after_healthy(component, reporter)


def _build(mode: str, home: Path, ports: Ports, resolve: bool,
           reporter: Reporter | None = None, temporal_db: str = "postgres") -> list[Component]:
    if mode == "ha":
        info = reporter.info if reporter is not None else (lambda _line: None)
        return build_ha_components(home, ports, resolve, info, temporal_db)
    return build_components(home, ports, resolve=resolve)


def _mode(previous: StackState | None, ha: bool) -> str:
    """``ha`` or ``single``; refuses to switch while the other kind still runs."""
    mode = "ha" if ha else "single"
    if previous is None or previous.mode == mode:
        return mode
    for component in _build(previous.mode, previous.home, previous.ports, False,
                            temporal_db=previous.temporal_db):
        pid, _ = _running_pid(component, previous.components.get(component.name))
        if pid is not None:
            other = "an HA stack (`up --ha`)" if previous.mode == "ha" else "a single-node stack"
            raise StackError(f"{other} runs in {previous.home} ({component.name}, pid {pid}); "
                             "`skyshift down` it first")  # fmt: skip
    return mode


def up(
    home: Path,
    flags: dict[str, int | None],
    reporter: Reporter,
    timeout: float | None = None,
    ha: bool = False,
    temporal_db: str | None = None,
) -> UpResult:
    """Start (or reuse) every installed component and wait until each is healthy, in order;
    ``ha``: the production topology on this machine (:mod:`skyshift.devstack.ha`), Temporal on
    ``temporal_db`` (None: the last run's, else PostgreSQL)."""
    secure_home(home)
    with locked(home):
        previous = StackState.load(home)
        ports = resolve_ports(flags, previous.ports if previous else None)
        mode = _mode(previous, ha)
        same = previous is not None and previous.mode == mode
        db = temporal_db or (previous.temporal_db if previous and same else "postgres")
        components = _build(mode, home, ports, True, reporter, db)
        records = dict(previous.components) if previous and same else {}
        state = StackState(home=home, ports=ports, components=records, mode=mode, temporal_db=db)
        result = UpResult(ports=ports, urls=urls(ports, home, mode, db),
                          metrics=metrics_targets.write(home, components))  # fmt: skip
        for component in components:
            record = state.components.get(component.name)
            if component.module is not None and not module_installed(component.module):
                state.components[component.name] = {"skipped": "not installed"}
                reporter.skipped(component, "not installed")
                result.skipped.append(component.name)
                continue
            limit = timeout or component.timeout
            pid, stale = _running_pid(component, record)
            if stale:
                component.pid_file.unlink(missing_ok=True)
                reporter.info(f"{component.name}: removed stale pid file")
            if pid is not None:
                _reuse(component, pid, record, limit, reporter)
                result.reused.append(component.name)
            else:
                _start(component, state, limit, reporter)
                result.started.append(component.name)
        state.save()
        return result


# --- down ----------------------------------------------------------------------------------


@dataclass
class Stopped:
    name: str
    pid: int | None
    outcome: str  # stopped | killed | not running | stale pid file | removed


def _components_for(home: Path) -> tuple[StackState | None, list[Component]]:
    state = StackState.load(home)
    ports = state.ports if state else resolve_ports({}, None)
    if state is None:
        return None, _build("single", home, ports, False)
    return state, _build(state.mode, home, ports, False, temporal_db=state.temporal_db)


def down(home: Path, purge: bool = False, grace: float = DEFAULT_GRACE) -> list[Stopped]:
    """Stop every component in reverse start order; ``purge`` also deletes data and logs."""
    if not home.exists():
        return []
    out: list[Stopped] = []
    with locked(home):
        state, components = _components_for(home)
        records = state.components if state else {}
        for component in reversed(components):
            pid, stale = _running_pid(component, records.get(component.name))
            if pid is not None:
                out.append(Stopped(component.name, pid, procs.stop_group(pid, grace)))
            elif stale:
                stale_pid = procs.read_pid(component.pid_file)
                out.append(Stopped(component.name, stale_pid, "stale pid file"))
            else:
                out.append(Stopped(component.name, None, "not running"))
            component.pid_file.unlink(missing_ok=True)
            component.ready_file.unlink(missing_ok=True)
            records.pop(component.name, None)
        if state is not None:
            state.components = records
            state.save()
        if firewall.remove(home):
            out.append(Stopped(f"firewall table inet {firewall.table_name(home)}", None,
                               "removed"))
        if purge:
            out += _purge(home, components, grace)
    return out


def _purge(home: Path, components: list[Component], grace: float) -> list[Stopped]:
    """Delete the stack's data, logs and local clusters: the ``local`` one ``up`` attached and
    every other one that kept its state under ``$SKYSHIFT_HOME/clusters`` (the default of a
    local cluster created without a ``state_dir``). Their replicas and HAProxies are stopped
    first, and their ``run_as`` working directories (outside the home) removed too."""
    out: list[Stopped] = []
    clusters = home / "clusters"
    if replicas := stop_replicas(clusters, grace):
        out.append(Stopped(f"{replicas} local replicas", None, "stopped"))
    if balancers := stop_balancers(clusters):
        out.append(Stopped(f"{balancers} local service proxies", None, "stopped"))
    for work_root in work_roots(clusters):
        shutil.rmtree(work_root, ignore_errors=True)
    for component in components:
        for path in component.data_dirs:
            shutil.rmtree(path, ignore_errors=True)
    for name in ("clusters", "logs"):
        shutil.rmtree(home / name, ignore_errors=True)
    (home / STATE_FILE).unlink(missing_ok=True)
    return out


# --- status --------------------------------------------------------------------------------


@dataclass
class ComponentStatus:
    name: str
    title: str
    installed: bool
    running: bool
    pid: int | None
    address: str
    healthy: bool
    detail: str
    metrics: str = ""  # the URL Prometheus scrapes ("" for none)


def status(home: Path) -> list[ComponentStatus]:
    state, components = _components_for(home) if home.exists() else (None, [])
    if not components:
        components = build_components(home, resolve_ports({}, None), resolve=False)
    records = state.components if state else {}
    out: list[ComponentStatus] = []
    for component in components:
        installed = component.module is None or module_installed(component.module)
        record = records.get(component.name)
        pid, _ = _running_pid(component, record)
        if pid is None:
            detail = "not installed" if not installed else "stopped"
            out.append(ComponentStatus(component.name, component.title, installed, False, None,
                                       component.address, False, detail,
                                       component.metrics))  # fmt: skip
            continue
        started_at = float((record or {}).get("started_at") or 0.0)
        result = health.check(component, started_at)
        out.append(ComponentStatus(component.name, component.title, installed, True, pid,
                                   component.address, result.ok, result.detail,
                                   component.metrics))  # fmt: skip
    return out


def all_healthy(statuses: list[ComponentStatus]) -> bool:
    """Every installed component runs and is healthy (uninstalled ones don't count)."""
    relevant = [s for s in statuses if s.installed or s.running]
    return bool(relevant) and all(s.running and s.healthy for s in relevant)
