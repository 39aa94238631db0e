"""Simulated Ray clusters on one machine: real ``ray start --head`` processes, one per cluster.

The ``ray`` adapter is tested against real Ray heads (GCS, raylet, dashboard with the Jobs API),
not a mock, and developers want a few Ray clusters next to ``skyshift up``. Each cluster is one
head node started with ``ray start --head --block`` in a process group of its own, with its own
ports (GCS, dashboard, node/object manager, agents, a list of worker ports: one block below
10000, off the ephemeral range, :mod:`skyshift.devstack.sim.ray_ports` says why), a short
``--temp-dir`` under the sim home (Ray puts AF_UNIX sockets there, and socket paths are limited
to ~107 characters), a small object store (``/dev/shm`` may be small), usage stats off, and an
environment reduced to ``PATH``/``HOME``/locale (the entrypoints of jobs inherit it, so the
caller's secrets must not be in it).

Who the heads run as: entrypoints of Ray jobs run as the user of the raylet. Run as root, ``up``
starts the heads as the unprivileged ``skyshift-run`` user (the one ``skyshift up`` creates for
local replicas), never as root: :mod:`skyshift.devstack.sim.ray_user` (docs/security.md).

``down`` stops a head by SIGTERM to its process group (``ray start --block`` stops what it
started), SIGKILL after a grace period, then sweeps any process still pointing at the cluster's
temp dir or GCS address (Ray workers and job entrypoints run in sessions of their own), and
checks none is left. :meth:`SimRayCluster.kill` is the same with SIGKILL first: a head crash
for failover tests. Mounted as ``skyshift sim ray up|down|status``; the pytest fixture uses
:func:`start_ray_clusters`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import click

from skyshift.config import skyshift_home
from skyshift.devstack.sim.ray_ports import NoFreePorts, head_ports
from skyshift.devstack.sim.ray_user import NoUnprivilegedUser, head_prefix

META_FILE = "cluster.json"
RUN_USER = "skyshift-run"
INSTALL_HINT = "pip install 'skyshift[ray]' (ray[default]: the Jobs API lives in the dashboard)"
_KEEP_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
_WORKER_PORTS = 48

Progress = Callable[[str], None]


class SimRayError(RuntimeError):
    """A head could not be started or stopped; the message says why."""


def default_home(skyshift: Path | None = None) -> Path:
    """``$SKYSHIFT_HOME/sim/ray`` (or of ``skyshift``); as root, a short directory in /tmp named
    after that path instead: the heads then run as skyshift-run, which cannot enter the 0700
    home that `skyshift up` keeps."""
    home = (skyshift or skyshift_home()).absolute() / "sim" / "ray"
    if os.geteuid() != 0:
        return home
    return Path("/tmp") / f"skyshift-ray-{hashlib.sha256(str(home).encode()).hexdigest()[:12]}"


def make_default_home(home: Path) -> None:
    """Create the default home; as root, one in /tmp is refused unless it is root's own
    directory (not a link another user put there), and it is left enterable (0711)."""
    home.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return
    st = os.lstat(home)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0:
        raise SimRayError(f"{home} is not a directory of root's (a link, or another user's): "
                          "remove it, or give --home")
    os.chmod(home, 0o711)


def ray_binary() -> str | None:
    """The ``ray`` CLI next to this Python (so heads run the same Ray the adapter imports)."""
    local = Path(sys.executable).parent / "ray"
    return str(local) if local.exists() else shutil.which("ray")


# ---- processes ------------------------------------------------------------------------------


def _start_ticks(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return int(fields[19]) if len(fields) > 19 and fields[0] not in ("Z", "X") else None


def _matching(needles: list[bytes]) -> list[int]:
    """Live processes whose command line or environment mentions one of ``needles``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        blob = b""
        for part in ("cmdline", "environ"):
            with contextlib.suppress(OSError):
                blob += (entry / part).read_bytes()
        if any(n in blob for n in needles) and _start_ticks(int(entry.name)) is not None:
            out.append(int(entry.name))
    return out


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        for p in pids:
            _reap(p)
        left = [p for p in pids if _start_ticks(p) is not None]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def run_as_user(home: Path, progress: Progress | None = None) -> tuple[str, list[str]]:
    """(user, argv prefix) heads start with: ``skyshift-run`` when we are root (never root
    itself, :mod:`skyshift.devstack.sim.ray_user`), ("", []) otherwise."""
    try:
        user, prefix = head_prefix(home)
    except NoUnprivilegedUser as exc:
        raise SimRayError(f"refusing to run Ray heads (and every Ray job) as root: {exc}; "
                          "see docs/security.md") from None
    if user and progress and len(prefix) > 6:
        progress(f"Ray heads run as {user} in a mount namespace that shows them only the "
                 "Python installation of otherwise private directories")
    return user, prefix


# ---- clusters -------------------------------------------------------------------------------


@dataclass
class SimRayCluster:
    """One simulated Ray cluster (a head node). ``address`` is what the adapter attaches to."""

    name: str
    root: Path
    gcs_port: int
    dashboard_port: int
    ports: dict[str, int]
    worker_ports: list[int]
    cpus: int
    gpus: int = 0
    gpu_type: str = "simgpu"
    object_store_mb: int = 128
    user: str = ""  # "" = the user that ran `up`
    prefix: list[str] = field(default_factory=list)  # starts the head as ``user`` (as root)
    host: str = "127.0.0.1"
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"http://{self.host}:{self.dashboard_port}"

    @property
    def temp_dir(self) -> Path:
        return self.root / "t"

    @property
    def pid_file(self) -> Path:
        return self.root / "head.pid"

    def adapter_config(self) -> dict[str, object]:
        return {"address": self.address}

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        meta = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}
        (self.root / META_FILE).write_text(json.dumps(meta, indent=1))

    @classmethod
    def load(cls, root: Path) -> SimRayCluster:
        data = json.loads((root / META_FILE).read_text())
        data["root"] = Path(data["root"])
        return cls(**data)

    # -- the head --

    def pid(self) -> int | None:
        try:
            pid_s, ticks_s = self.pid_file.read_text().split()
            pid, ticks = int(pid_s), int(ticks_s)
        except (OSError, ValueError):
            return None
        return pid if _start_ticks(pid) == ticks else None

    def running(self) -> bool:
        return self.pid() is not None

    def argv(self, ray: str) -> list[str]:
        resources = {f"accelerator_type:{self.gpu_type}": 1} if self.gpus else {}
        p = self.ports
        argv = [
            ray, "start", "--head", "--block", "--disable-usage-stats",
            f"--node-ip-address={self.host}", f"--port={self.gcs_port}",
            "--include-dashboard=true", f"--dashboard-host={self.host}",
            f"--dashboard-port={self.dashboard_port}",
            f"--node-manager-port={p['node_manager']}",
            f"--object-manager-port={p['object_manager']}",
            f"--ray-client-server-port={p['client_server']}",
            f"--dashboard-agent-listen-port={p['agent_listen']}",
            f"--dashboard-agent-grpc-port={p['agent_grpc']}",
            f"--runtime-env-agent-port={p['runtime_env_agent']}",
            f"--metrics-export-port={p['metrics']}",
            f"--worker-port-list={','.join(str(w) for w in self.worker_ports)}",
            f"--num-cpus={self.cpus}", f"--num-gpus={self.gpus}",
            f"--object-store-memory={self.object_store_mb * 1_000_000}",
            f"--temp-dir={self.temp_dir}",
        ]
        if resources:
            argv.append(f"--resources={json.dumps(resources)}")
        return argv

    def start(self, progress: Progress | None = None, timeout: float = 180.0) -> None:
        self.start_async(progress)
        self.wait_started(timeout)

    def start_async(self, progress: Progress | None = None) -> None:
        """Spawn the head (``wait_started`` waits for its Jobs API)."""
        if self.running():
            return
        ray = ray_binary()
        if ray is None:
            raise SimRayError(f"the `ray` command is missing: {INSTALL_HINT}")
        self.sweep()  # leftovers of a crashed run
        self.temp_dir.mkdir(parents=True, exist_ok=True)
        home = self.root / "home"
        home.mkdir(exist_ok=True)
        env = {k: v for k in _KEEP_ENV if (v := os.environ.get(k)) is not None}
        env.update(HOME=str(home), RAY_USAGE_STATS_ENABLED="0", PYTHONUNBUFFERED="1",
                   # on SIGTERM the head first drains for Ray Serve, 30 s by default, before it
                   # stops its processes: `down` waited out its whole grace; nothing to drain here
                   RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="0")
        argv = self.argv(ray)
        uid: int | None = None
        gid: int | None = None
        if self.prefix:
            argv = [*self.prefix, *argv]
        if self.user:
            user = pwd.getpwnam(self.user)
            uid, gid = user.pw_uid, user.pw_gid
            for d in (self.root, self.temp_dir, home):
                os.chown(d, uid, gid)
            env.update(USER=self.user, LOGNAME=self.user)
            if self.prefix:  # setpriv in the prefix drops to the user after the mounts
                uid = gid = None
        log = self.root / "head.log"
        with log.open("ab") as out:
            child = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                cwd=str(home), start_new_session=True, close_fds=True, user=uid, group=gid,
                extra_groups=[] if uid is not None else None,
            )
        self.pid_file.write_text(f"{child.pid} {_start_ticks(child.pid) or 0}\n")
        if progress:
            progress(f"{self.name}: starting a Ray head ({self.cpus} CPUs"
                     f"{f', {self.gpus} fake GPUs' if self.gpus else ''}) on {self.address}"
                     f"{f' as {self.user}' if self.user else ''}")

    def wait_started(self, timeout: float = 180.0, retries: int = 2) -> None:
        """Wait until the Jobs API answers. ``ray start`` gives the raylet 30 s to register
        with the GCS (hard-coded in Ray's node.py) and exits when it did not: on a loaded
        machine (the test suite's two workers, a SkyPilot bed starting beside it) that happens,
        and the head is then started again, up to ``retries`` times."""
        log = self.root / "head.log"
        deadline = time.monotonic() + timeout
        while not self.jobs_api_ready():
            if not self.running():
                said = _tail(log)
                if retries > 0 and _SLOW_START in said:
                    retries -= 1
                    self.stop()
                    with log.open("a") as out:
                        out.write(f"\n[skyshift] {self.name}: Ray's node start timed out; "
                                  "starting the head again\n")
                    self.start_async()
                    deadline = time.monotonic() + timeout
                    continue
                raise SimRayError(f"ray start for {self.name} exited: {said}")
            if time.monotonic() > deadline:
                self.stop()
                raise SimRayError(f"{self.name}: the Jobs API did not answer within "
                                  f"{timeout:g}s; log {log}")
            time.sleep(0.5)

    def jobs_api_ready(self) -> bool:
        """The dashboard answers the Jobs API and the head node is alive in the state API."""
        try:
            with urllib.request.urlopen(f"{self.address}/api/jobs/", timeout=5) as resp:
                if resp.status != 200:
                    return False
            with urllib.request.urlopen(f"{self.address}/api/v0/nodes?limit=10",
                                        timeout=5) as resp:
                body = json.loads(resp.read())
        except (OSError, ValueError):
            return False
        nodes = ((body.get("data") or {}).get("result") or {}).get("result") or []
        return any(n.get("state") == "ALIVE" for n in nodes)

    def _needles(self) -> list[bytes]:
        return [str(self.temp_dir).encode(), f":{self.gcs_port}\0".encode(),
                f"RAY_ADDRESS={self.host}:{self.gcs_port}".encode()]

    def processes(self) -> list[int]:
        """Every live process of this cluster (head group, workers, job entrypoints)."""
        pids = set(_matching(self._needles()))
        head = self.pid()
        if head is not None:
            pids.add(head)
        return sorted(pids)

    def _signal_all(self, sig: signal.Signals) -> None:
        head = self.pid()
        if head is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(head, sig)
        for pid in _matching(self._needles()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def sweep(self) -> list[int]:
        """SIGKILL whatever of this cluster still runs; returns what is left (should be [])."""
        pids = self.processes()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        return _wait_gone(pids, 10.0)

    def kill(self) -> None:
        """A crash: SIGKILL the head's processes at once (jobs' entrypoints too)."""
        self._signal_all(signal.SIGKILL)
        left = self.sweep()
        self.pid_file.unlink(missing_ok=True)
        if left:
            raise SimRayError(f"{self.name}: processes survived SIGKILL: {left}")

    def stop(self, grace: float = 15.0) -> None:
        head = self.pid()
        if head is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(head, signal.SIGTERM)
            _wait_gone([head], grace)
        left = self.sweep()
        self.pid_file.unlink(missing_ok=True)
        if left:
            raise SimRayError(f"{self.name}: processes left after stop: {left}")


#: what ``ray start`` says when its raylet did not register with the GCS within 30 s
_SLOW_START = "The current node timed out during startup"


def _tail(path: Path, lines: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def existing_clusters(home: Path) -> list[SimRayCluster]:
    if not home.is_dir():
        return []
    out = []
    for meta in sorted(home.glob(f"*/{META_FILE}")):
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
            out.append(SimRayCluster.load(meta.parent))
    return out


def start_ray_clusters(
    home: Path | None = None,
    clusters: int = 1,
    cpus: int = 2,
    gpus: int = 0,
    prefix: str = "r",
    object_store_mb: int = 128,
    progress: Progress | None = None,
) -> list[SimRayCluster]:
    """Start (or reuse) ``clusters`` heads, at most two starting at once (a Ray head is CPU
    hungry while it starts); return them with their Jobs API answering."""
    if ray_binary() is None:
        raise SimRayError(f"the `ray` command is missing: {INSTALL_HINT}")
    if home is None:
        home = default_home()
        make_default_home(home)
    home = home.absolute()
    home.mkdir(parents=True, exist_ok=True)
    known = {c.name: c for c in existing_clusters(home)}
    used = {p for c in known.values()
            for p in [c.gcs_port, c.dashboard_port, *c.ports.values(), *c.worker_ports]}
    user, head_argv = run_as_user(home, progress)
    result: list[SimRayCluster] = []
    todo: list[SimRayCluster] = []
    for i in range(1, clusters + 1):
        name = f"{prefix}{i}"
        cluster = known.get(name)
        if cluster is not None and cluster.running():
            if progress:
                progress(f"{name}: already running on {cluster.address} (reused)")
            result.append(cluster)
            continue
        if cluster is not None:
            cluster.sweep()
        keys = ["node_manager", "object_manager", "client_server", "agent_listen",
                "agent_grpc", "runtime_env_agent", "metrics"]
        try:  # one block below the ephemeral range (ray_ports says why)
            ports = head_ports(2 + len(keys) + _WORKER_PORTS, used)
        except NoFreePorts as exc:
            raise SimRayError(str(exc)) from None
        used.update(ports)
        cluster = SimRayCluster(
            name=name, root=home / name, gcs_port=ports[0], dashboard_port=ports[1],
            ports=dict(zip(keys, ports[2:2 + len(keys)], strict=True)),
            worker_ports=ports[2 + len(keys):], cpus=cpus, gpus=gpus,
            object_store_mb=object_store_mb, user=user, prefix=head_argv,
        )
        cluster.save()
        todo.append(cluster)
        result.append(cluster)
    try:
        for batch in (todo[i:i + 2] for i in range(0, len(todo), 2)):
            for c in batch:
                c.start_async(progress)
            for c in batch:
                c.wait_started()
    except Exception:
        for c in todo:
            with contextlib.suppress(SimRayError):
                c.stop()
        raise
    return result


def stop_ray_clusters(home: Path | None = None, progress: Progress | None = None) -> int:
    """Stop every cluster under ``home``; returns how many were running. Raises when a
    process of one of them survives."""
    home = (home or default_home()).absolute()
    count, errors = 0, []
    for cluster in existing_clusters(home):
        if cluster.running():
            count += 1
            if progress:
                progress(f"{cluster.name}: stopping")
        try:
            cluster.stop()
        except SimRayError as exc:
            errors.append(str(exc))
    if errors:
        raise SimRayError("; ".join(errors))
    return count


@contextlib.contextmanager
def ray_clusters(**kwargs: object) -> Iterator[list[SimRayCluster]]:
    """``start_ray_clusters(**kwargs)`` for the duration of a ``with`` block."""
    clusters = start_ray_clusters(**kwargs)  # type: ignore[arg-type]
    try:
        yield clusters
    finally:
        stop_ray_clusters(clusters[0].root.parent if clusters else None)


# ---- CLI ------------------------------------------------------------------------------------

_home_option = click.option(
    "--home", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="Where temp dirs and logs live [default: $SKYSHIFT_HOME/sim/ray; as root, "
         "/tmp/skyshift-ray-<hash of that path>, which the heads' user can enter]; keep it short "
         "(Ray's socket paths go under it).",
)


@click.group("ray")
def ray() -> None:
    """Simulated Ray clusters (a real `ray start --head` per cluster)."""


@ray.command("up")
@click.option("--clusters", type=click.IntRange(1, 8), default=1, show_default=True)
@click.option("--cpus", type=click.IntRange(1), default=2, show_default=True,
              help="CPUs each head declares (Ray schedules on these; nothing enforces them).")
@click.option("--gpus", type=click.IntRange(0), default=0, show_default=True,
              help="Fake GPUs per head (a resource Ray schedules; no devices behind it), of "
                   "accelerator type simgpu.")
@click.option("--object-store-mb", type=click.IntRange(80), default=128, show_default=True)
@_home_option
def up(clusters: int, cpus: int, gpus: int, object_store_mb: int, home: Path | None) -> None:
    """Start the heads (a second `up` reuses the running ones) and print how to attach them."""
    try:
        started = start_ray_clusters(home, clusters=clusters, cpus=cpus, gpus=gpus,
                                     object_store_mb=object_store_mb, progress=click.echo)
    except SimRayError as exc:
        raise click.ClickException(str(exc)) from exc
    for c in started:
        click.echo(f"{c.name}: ready; attach with: skyctl create cluster {c.name} "
                   f"--manager ray --address {c.address}")


@ray.command("down")
@_home_option
def down(home: Path | None) -> None:
    """Stop every head and every process Ray started for them."""
    try:
        count = stop_ray_clusters(home, progress=click.echo)
    except SimRayError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"stopped {count} running cluster(s)")


@ray.command("address")
@click.argument("name")
@_home_option
def address(name: str, home: Path | None) -> None:
    """Print the dashboard URL of the running cluster NAME: what `skyctl create cluster NAME
    --manager ray --address` takes."""
    found = {c.name: c for c in existing_clusters((home or default_home()).absolute())}
    cluster = found.get(name)
    if cluster is None or not cluster.running():
        running = sorted(n for n, c in found.items() if c.running())
        raise click.ClickException(
            f"no running simulated Ray cluster {name!r} (running: {', '.join(running) or 'none'};"
            " start them with `skyshift sim ray up`)")
    click.echo(cluster.address)


@ray.command("status")
@_home_option
def status(home: Path | None) -> None:
    """Show each cluster, its address and whether its Jobs API answers."""
    found = existing_clusters((home or default_home()).absolute())
    if not found:
        click.echo("no simulated Ray clusters")
    for c in found:
        if not c.running():
            click.echo(f"{c.name}: stopped")
            continue
        api = "Jobs API ready" if c.jobs_api_ready() else "Jobs API not answering"
        click.echo(f"{c.name}: running on {c.address} ({api}; {len(c.processes())} processes"
                   f"{f', as {c.user}' if c.user else ''})")
