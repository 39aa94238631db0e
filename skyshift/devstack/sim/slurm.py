"""Simulated Slurm clusters on one machine: real slurmctld/slurmd daemons, fake node shapes.

The Slurm adapter is tested against real Slurm 22.05, not a mock, and developers want a few Slurm
clusters next to ``skyshift up`` without a rack. This module writes one ``slurm.conf`` per cluster
(own ``ClusterName``, ``SlurmctldPort``, slurmd ports, state/spool/log dirs under ``home``),
starts one private ``munged`` shared by all of them (own key and socket, referenced through
``AuthInfo=socket=...``, so the host's munge is never touched), one ``slurmctld`` per cluster and
one ``slurmd -N <node>`` per logical node, and waits until ``sinfo`` shows every node idle.
Clients reach a cluster only through ``SLURM_CONF=<home>/<cluster>/slurm.conf``.

Several logical nodes per host (evidence, Debian bookworm, slurm-wlm 22.05.8, 2026-11-21): with one
``NodeName=<node> NodeHostname=<host> NodeAddr=127.0.0.1 Port=<p>`` line per node and one
``slurmd -D -N <node>`` each, all nodes register and go ``idle``, and ``scontrol show config``
reports ``MULTIPLE_SLURMD = Yes``, i.e. Debian builds with ``--enable-multiple-slurmd``;
``SlurmdSpoolDir``/``SlurmdPidFile``/``SlurmdLogFile`` take ``%n`` to keep the daemons apart.
``SlurmdParameters=config_overrides`` lets a node declare more CPUs/memory than the host has
(without it such nodes are drained as "Low CPUs"); jobs are not confined (``task/none``), so the
shapes are for placement, not enforcement. Two clusters side by side only need distinct ports and
directories. Other facts found here: ``scontrol ... --json`` does not exist in 22.05; ``squeue
--json`` ignores filters such as ``-j``/``--name``; with slurmctld down ``squeue --json`` and
``sinfo --json`` exit 0 after ~9 s with an ``errors`` entry and empty lists.

Needs root (slurmd runs jobs as their owner) and ``scripts/install-slurm.sh``. Mounted in the CLI
as ``skyshift sim slurm up|down|status``; the pytest fixture uses :func:`start_slurm_clusters`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import click

from skyshift.config import skyshift_home
from skyshift.devstack.sim import ports

BINARIES = ("munged", "slurmctld", "slurmd", "sinfo", "squeue", "scancel")
INSTALL_HINT = "run scripts/install-slurm.sh"
META_FILE = "cluster.json"

Progress = Callable[[str], None]


class SimSlurmError(RuntimeError):
    """The test bed could not be started or stopped; the message says why."""


def default_home() -> Path:
    return skyshift_home() / "sim" / "slurm"


# ---- processes ------------------------------------------------------------------------------


def _start_ticks(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return int(fields[19]) if len(fields) > 19 and fields[0] not in ("Z", "X") else None


def _write_pid(path: Path, pid: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{pid} {_start_ticks(pid) or 0}\n")


def _running_pid(path: Path) -> int | None:
    """The pid recorded in ``path`` if that very process (same start time) still runs."""
    try:
        pid_s, ticks_s = path.read_text().split()
        pid, ticks = int(pid_s), int(ticks_s)
    except (OSError, ValueError):
        return None
    now = _start_ticks(pid)
    return pid if now is not None and (ticks == 0 or now == ticks) else None


def _spawn(argv: list[str], log: Path, pid_file: Path, env: dict[str, str]) -> int:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        child = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, **env}, start_new_session=True, close_fds=True,
        )
    _write_pid(pid_file, child.pid)
    return child.pid


def _stop(pid_file: Path, grace: float = 10.0) -> bool:
    """SIGTERM the recorded process (and its group), SIGKILL after ``grace``; True if it ran."""
    pid = _running_pid(pid_file)
    pid_file.unlink(missing_ok=True)
    if pid is None:
        return False
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if _start_ticks(pid) is None:
                _reap(pid)
                return True
            _reap(pid)
            time.sleep(0.05)
    return True


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def free_ports(count: int, avoid: set[int] | None = None) -> list[int]:
    """``count`` distinct TCP ports that are free right now (and not in ``avoid``), below the
    ephemeral range (:mod:`skyshift.devstack.sim.ports` says why)."""
    return ports.free_ports(count, frozenset(avoid or ()))


# ---- munge ----------------------------------------------------------------------------------


@dataclass
class Munge:
    """One private munged for every cluster under a home."""

    root: Path

    @property
    def socket(self) -> Path:
        return self.root / "run" / "munge.socket.2"

    @property
    def pid_file(self) -> Path:
        return self.root / "munged.pid"

    def running(self) -> bool:
        return _running_pid(self.pid_file) is not None and self.socket.exists()

    def start(self) -> None:
        if self.running():
            return
        key_dir, run_dir = self.root / "etc", self.root / "run"
        for d, mode in ((self.root, 0o755), (key_dir, 0o700), (run_dir, 0o755)):
            d.mkdir(parents=True, exist_ok=True)
            d.chmod(mode)
        key = key_dir / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        self.socket.unlink(missing_ok=True)
        argv = [
            "munged", "--foreground", "--force", f"--socket={self.socket}",
            f"--key-file={key}", f"--log-file={self.root / 'munged.log'}",
            f"--pid-file={self.root / 'munged.real.pid'}",
            f"--seed-file={self.root / 'munged.seed'}",
        ]
        _spawn(argv, self.root / "munged.out", self.pid_file, {})
        if not _wait_for(self.socket.exists, 10.0):
            raise SimSlurmError(f"munged did not start: {_tail(self.root / 'munged.out')}")

    def stop(self) -> None:
        _stop(self.pid_file)


# ---- clusters -------------------------------------------------------------------------------


@dataclass
class SimSlurmCluster:
    """One simulated cluster. ``conf`` is what ``SLURM_CONF`` must point at."""

    name: str
    root: Path
    nodes: list[str]
    ctld_port: int
    node_ports: list[int]
    node_cpus: int
    node_memory: int
    munge_socket: Path
    min_job_age: int = 300
    node_gpus: int = 0  # fake GPUs per node (gres without device files: placement only)
    gpu_type: str = "simgpu"
    # Slurm's default batch_sched_delay=3 holds new batch jobs up to 3 s before the scheduler
    # looks at them (measured here: ~2.5 s from sbatch to R, ~0.5 s with the delay at 0)
    scheduler_parameters: str = "batch_sched_delay=0"
    hostname: str = field(default_factory=socket.gethostname)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def adapter_config(self, workdir: Path | str | None = None) -> dict[str, object]:
        """A Slurm cluster config for SkyShift's adapter (local commands)."""
        return {
            "slurm_conf": str(self.conf),
            "workdir": str(workdir or self.root / "work"),
        }

    # -- files --

    def write_conf(self) -> None:
        for sub in ("state", "spool", "log", "run", "work"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        r = self.root
        gres = ""
        if self.node_gpus > 0:
            gres = f" Gres=gpu:{self.gpu_type}:{self.node_gpus}"
            self._write_gres()
        lines = [
            f"# simulated cluster {self.name}, written by skyshift.devstack.sim.slurm",
            f"ClusterName={self.name}",
            *(["GresTypes=gpu"] if self.node_gpus > 0 else []),
            f"SlurmctldHost={self.hostname}(127.0.0.1)",
            f"SlurmctldPort={self.ctld_port}",
            f"SlurmdPort={self.node_ports[0]}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "ReturnToService=2",
            "SlurmdParameters=config_overrides",
            "EnforcePartLimits=ALL",
            # a job without --mem would otherwise get a whole node's memory
            "DefMemPerCPU=100",
            # finished jobs stay visible to squeue this long (the adapter does not rely on it)
            f"MinJobAge={self.min_job_age}",
            "KillWait=5",
            *([f"SchedulerParameters={self.scheduler_parameters}"]
              if self.scheduler_parameters else []),
            "InactiveLimit=0",
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool' / '%n'}",
            f"SlurmctldPidFile={r / 'run' / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'run' / 'slurmd-%n.pid'}",
            f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={r / 'log' / 'slurmd-%n.log'}",
        ]
        for node, port in zip(self.nodes, self.node_ports, strict=True):
            lines.append(
                f"NodeName={node} NodeHostname={self.hostname} NodeAddr=127.0.0.1 Port={port} "
                f"CPUs={self.node_cpus} RealMemory={self.node_memory}{gres} State=UNKNOWN"
            )
        lines.append("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(lines) + "\n")
        meta = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}
        (self.root / META_FILE).write_text(json.dumps(meta, indent=1))

    def _write_gres(self) -> None:
        """Fake GPUs: slurmd insists on a character device per GPU (a regular file is refused,
        ``Count=`` alone reports 0), so each is a node with /dev/null's numbers (1, 3)."""
        lines = ["AutoDetect=off"]
        for node in self.nodes:
            dev = self.root / "dev" / node
            dev.mkdir(parents=True, exist_ok=True)
            for i in range(self.node_gpus):
                path = dev / f"gpu{i}"
                if not path.exists():
                    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
            files = f"gpu[0-{self.node_gpus - 1}]" if self.node_gpus > 1 else "gpu0"
            lines.append(
                f"NodeName={node} Name=gpu Type={self.gpu_type} File={dev}/{files}"
            )
        (self.root / "gres.conf").write_text("\n".join(lines) + "\n")

    @classmethod
    def load(cls, root: Path) -> SimSlurmCluster:
        data = json.loads((root / META_FILE).read_text())
        data["root"] = Path(data["root"])
        data["munge_socket"] = Path(data["munge_socket"])
        return cls(**data)

    # -- daemons --

    def daemon_pids(self) -> list[int | None]:
        """slurmctld's and each slurmd's pid (None for one that is not running): what the
        benchmarks count as the cluster's own CPU."""
        files = [self._ctld_pid(), *(self._node_pid(node) for node in self.nodes)]
        return [_running_pid(f) for f in files]

    def _ctld_pid(self) -> Path:
        return self.root / "run" / "skyshift-slurmctld.pid"

    def _node_pid(self, node: str) -> Path:
        return self.root / "run" / f"skyshift-slurmd-{node}.pid"

    def controller_running(self) -> bool:
        return _running_pid(self._ctld_pid()) is not None

    def start_controller(self, fresh: bool = False) -> None:
        """Start slurmctld (keeping saved job state unless ``fresh``)."""
        if self.controller_running():
            return
        if fresh:
            shutil.rmtree(self.root / "state", ignore_errors=True)
            (self.root / "state").mkdir(parents=True)
        argv = ["slurmctld", "-D", "-f", str(self.conf)] + (["-c"] if fresh else [])
        _spawn(argv, self.root / "log" / "slurmctld.out", self._ctld_pid(), self.env)

    def stop_controller(self) -> None:
        """Stop slurmctld only: jobs keep running on the nodes, clients get errors."""
        _stop(self._ctld_pid())

    def start_nodes(self) -> None:
        for node in self.nodes:
            if _running_pid(self._node_pid(node)) is not None:
                continue
            (self.root / "spool" / node).mkdir(parents=True, exist_ok=True)
            _spawn(
                ["slurmd", "-D", "-N", node, "-f", str(self.conf)],
                self.root / "log" / f"slurmd-{node}.out", self._node_pid(node), self.env,
            )

    def node_states(self) -> dict[str, str]:
        """node -> sinfo state ("idle", "mixed", "down*", ...); empty when unreachable."""
        try:
            out = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], timeout=15)
        except SimSlurmError:
            return {}
        states: dict[str, str] = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2:
                states[parts[0]] = parts[1]
        return states

    def wait_ready(self, timeout: float = 90.0, progress: Progress | None = None) -> None:
        """Until every node is idle (or allocated/mixed: usable)."""
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            states = self.node_states()
            usable = [n for n in self.nodes if states.get(n, "").rstrip("*") in _USABLE]
            summary = f"{self.name}: {len(usable)}/{len(self.nodes)} nodes idle"
            if progress and summary != last:
                progress(summary)
                last = summary
            if len(usable) == len(self.nodes) and all(
                not states[n].endswith("*") for n in usable
            ):
                return
            if not self.controller_running():
                raise SimSlurmError(f"slurmctld of {self.name} exited: {self._ctld_log()}")
            if time.monotonic() >= deadline:
                raise SimSlurmError(
                    f"{self.name}: nodes not idle after {timeout:g}s ({states or 'no answer'}); "
                    f"logs in {self.root / 'log'}"
                )
            time.sleep(0.5)

    def start(self, fresh: bool = True, progress: Progress | None = None) -> None:
        self.start_controller(fresh=fresh)
        if not _wait_for(lambda: self.run_ok(["scontrol", "ping"]), 30.0):
            raise SimSlurmError(f"slurmctld of {self.name} did not answer: {self._ctld_log()}")
        self.start_nodes()
        self.wait_ready(progress=progress)

    def cancel_all(self) -> None:
        """Cancel every job (running job processes must not outlive the test bed)."""
        try:
            ids = self.run(["squeue", "-h", "-t", "all", "-o", "%i"], timeout=15).split()
        except SimSlurmError:
            return
        if ids:
            with contextlib.suppress(SimSlurmError):
                self.run(["scancel", "--quiet", *ids], timeout=15)
            _wait_for(lambda: not self.run_ok(["squeue", "-h", "-t", "R,CG", "-o", "%i"],
                                               want_output=True), 15.0)

    def stop(self) -> None:
        if self.controller_running():
            self.cancel_all()
        for node in self.nodes:
            _stop(self._node_pid(node))
        self.stop_controller()

    # -- commands --

    def run(self, argv: list[str], timeout: float = 30.0) -> str:
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=timeout,
                env={**os.environ, **self.env},
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SimSlurmError(f"{argv[0]}: {exc}") from exc
        if done.returncode != 0:
            raise SimSlurmError(f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}")
        return done.stdout

    def run_ok(self, argv: list[str], want_output: bool = False) -> bool:
        try:
            out = self.run(argv, timeout=15)
        except SimSlurmError:
            return False
        return bool(out.strip()) if want_output else True

    def _ctld_log(self) -> str:
        return _tail(self.root / "log" / "slurmctld.log") or _tail(
            self.root / "log" / "slurmctld.out"
        )


_USABLE = ("idle", "mix", "alloc", "mixed", "allocated")


def _wait_for(done: Callable[[], bool], timeout: float, step: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if done():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def check_prerequisites() -> None:
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        raise SimSlurmError(f"missing {', '.join(missing)}: {INSTALL_HINT}")
    if os.geteuid() != 0:
        raise SimSlurmError("the simulated Slurm test bed must run as root (slurmd needs it)")


def existing_clusters(home: Path) -> list[SimSlurmCluster]:
    if not home.is_dir():
        return []
    out = []
    for meta in sorted(home.glob(f"*/{META_FILE}")):
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
            out.append(SimSlurmCluster.load(meta.parent))
    return out


def start_slurm_clusters(
    home: Path | None = None,
    clusters: int = 2,
    nodes: int = 2,
    node_cpus: int = 4,
    node_memory: int = 4000,
    prefix: str = "slurm",
    min_job_age: int = 300,
    node_gpus: int = 0,
    scheduler_parameters: str = "batch_sched_delay=0",
    progress: Progress | None = None,
) -> list[SimSlurmCluster]:
    """Start (or reuse) ``clusters`` clusters of ``nodes`` nodes each; return them ready."""
    check_prerequisites()
    home = (home or default_home()).absolute()
    home.mkdir(parents=True, exist_ok=True)
    munge = Munge(home / "munge")
    munge.start()
    known = {c.name: c for c in existing_clusters(home)}
    used_ports = {p for c in known.values() for p in [c.ctld_port, *c.node_ports]}
    result = []
    for i in range(1, clusters + 1):
        name = f"{prefix}{i}"
        cluster = known.get(name)
        if cluster is not None and cluster.controller_running():
            shape = (len(cluster.nodes), cluster.node_cpus, cluster.node_memory,
                     cluster.node_gpus)
            same = shape == (nodes, node_cpus, node_memory, node_gpus)
            if progress:
                progress(f"{name}: already running (reused"
                         f"{'' if same else '; run `down` first to change its shape'})")
            cluster.start_nodes()
            cluster.wait_ready(progress=progress)
            result.append(cluster)
            continue
        if cluster is not None:
            cluster.stop()  # leftovers of a crashed run
        ports = free_ports(nodes + 1, used_ports)
        used_ports.update(ports)
        cluster = SimSlurmCluster(
            name=name, root=home / name, nodes=[f"{name}-n{j}" for j in range(1, nodes + 1)],
            ctld_port=ports[0], node_ports=ports[1:], node_cpus=node_cpus,
            node_memory=node_memory, munge_socket=munge.socket, min_job_age=min_job_age,
            scheduler_parameters=scheduler_parameters, node_gpus=node_gpus,
        )
        cluster.write_conf()
        if progress:
            progress(f"{name}: starting slurmctld on port {cluster.ctld_port} and "
                     f"{nodes} slurmd ({node_cpus} CPUs, {node_memory} MB each)")
        try:
            cluster.start(fresh=True, progress=progress)
        except SimSlurmError:
            cluster.stop()
            raise
        result.append(cluster)
    return result


def stop_slurm_clusters(home: Path | None = None, progress: Progress | None = None) -> int:
    """Stop every cluster under ``home`` and the shared munged; returns how many were running."""
    home = (home or default_home()).absolute()
    count = 0
    for cluster in existing_clusters(home):
        if cluster.controller_running():
            count += 1
        if progress:
            progress(f"{cluster.name}: stopping")
        cluster.stop()
    Munge(home / "munge").stop()
    return count


@contextlib.contextmanager
def slurm_clusters(**kwargs: object) -> Iterator[list[SimSlurmCluster]]:
    """``start_slurm_clusters(**kwargs)`` for the duration of a ``with`` block."""
    clusters = start_slurm_clusters(**kwargs)  # type: ignore[arg-type]
    try:
        yield clusters
    finally:
        stop_slurm_clusters(clusters[0].root.parent if clusters else None)


# ---- CLI ------------------------------------------------------------------------------------

_home_option = click.option(
    "--home", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="Where configs, state and logs live [default: $SKYSHIFT_HOME/sim/slurm].",
)


@click.group("slurm")
def slurm() -> None:
    """Simulated Slurm clusters (real slurmctld/slurmd, several logical nodes per host)."""


@slurm.command("up")
@click.option("--clusters", type=click.IntRange(1, 16), default=2, show_default=True)
@click.option("--nodes", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Logical nodes per cluster.")
@click.option("--node-cpus", type=click.IntRange(1), default=4, show_default=True)
@click.option("--node-memory", type=click.IntRange(1), default=4000, show_default=True,
              help="MB per node.")
@click.option("--node-gpus", type=click.IntRange(0), default=0, show_default=True,
              help="Fake GPUs per node (a gres Slurm schedules; no devices behind it).")
@_home_option
def up(clusters: int, nodes: int, node_cpus: int, node_memory: int, node_gpus: int,
       home: Path | None) -> None:
    """Start the clusters (a second `up` reuses the running ones)."""
    try:
        started = start_slurm_clusters(
            home, clusters=clusters, nodes=nodes, node_cpus=node_cpus,
            node_memory=node_memory, node_gpus=node_gpus, progress=click.echo,
        )
    except SimSlurmError as exc:
        raise click.ClickException(str(exc)) from exc
    for c in started:
        click.echo(f"{c.name}: ready, nodes {', '.join(c.nodes)}; "
                   f"use SLURM_CONF={c.conf} (adapter config: slurm_conf: {c.conf})")


@slurm.command("down")
@_home_option
def down(home: Path | None) -> None:
    """Cancel their jobs and stop every daemon."""
    count = stop_slurm_clusters(home, progress=click.echo)
    click.echo(f"stopped {count} running cluster(s)")


@slurm.command("status")
@_home_option
def status(home: Path | None) -> None:
    """Show each cluster and its nodes' states."""
    found = existing_clusters((home or default_home()).absolute())
    if not found:
        click.echo("no simulated Slurm clusters")
    for c in found:
        if not c.controller_running():
            click.echo(f"{c.name}: stopped")
            continue
        states = c.node_states()
        nodes = ", ".join(f"{n}={states.get(n, '?')}" for n in c.nodes)
        click.echo(f"{c.name}: running (SLURM_CONF={c.conf}) {nodes}")
