"""The SkyPilot test bed: SkyPilot 0.14 ``skypilot[slurm]`` against a simulated Slurm cluster
reached through an sshd login node (docs/skypilot.md), for the tests (tests/fixtures/skypilot.py)
and the provisioning benchmark (bench/provision.py).

- one simulated Slurm cluster ``skysim1`` (2 nodes, 8 CPUs and 16000 MB each: room for several of
  SkyPilot's default 2 GB clusters), its slurmd running in a private mount namespace whose
  /etc/hosts resolves the node names (SkyPilot's skylet looks its node up by name), under a
  world-readable directory the SkyPilot user can read;
- an sshd on 127.0.0.1 whose only login is the SkyPilot user (``scripts/install-skypilot.sh``
  creates it), with ``SLURM_CONF`` set for its sessions; ``~/.slurm/config`` and
  ``~/.sky/config.yaml`` of that user point SkyPilot at it as infra ``slurm/skysim1``.

SkyPilot's user has one home, one API server and one port: one bed per machine at a time
(:func:`testbed_lock`; a second one waits). ``skyshift sim skypilot up`` (sim/skypilot_cli.py)
starts the same bed from the command line and leaves it running until ``down``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from skyshift.compat.skypilot.client import DEFAULT_USER, SkyPilotClient
from skyshift.devstack.sim.slurm import (
    Munge,
    SimSlurmCluster,
    _running_pid,
    _spawn,
    _stop,
    free_ports,
)


class BedMissing(RuntimeError):
    """Something the bed needs is not installed on this machine."""


INSTALL = "scripts/install-skypilot.sh"
SIM_NAME = "skysim1"
INFRA = f"slurm/{SIM_NAME}"
NODE_CPUS = 8
NODE_MEMORY = 16000
LOGIN_KEY = ".ssh/skyshift-login"
LOCK_FILE = Path(tempfile.gettempdir()) / "skyshift-skypilot-testbed.lock"
SSHD_PID = "sshd.skyshift.pid"


class _NamedNodeCluster(SimSlurmCluster):
    """A sim cluster whose slurmd see an /etc/hosts naming the logical nodes (bind-mounted in a
    private mount namespace: the machine's /etc/hosts is never edited)."""

    def start_nodes(self) -> None:
        hosts = self.root / "hosts"
        base = Path("/etc/hosts").read_text()
        hosts.write_text(base.rstrip("\n") + f"\n127.0.0.1 {' '.join(self.nodes)}\n")
        hosts.chmod(0o644)
        for node in self.nodes:
            if _running_pid(self._node_pid(node)) is not None:
                continue
            (self.root / "spool" / node).mkdir(parents=True, exist_ok=True)
            script = (f"mount --bind {hosts} /etc/hosts && exec slurmd -D -N {node} "
                      f"-f {self.conf}")
            _spawn(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                   self.root / "log" / f"slurmd-{node}.out", self._node_pid(node), self.env)


@dataclass
class SkySlurm:
    """The simulated Slurm cluster and its login node, as SkyPilot's user sees them."""

    cluster: SimSlurmCluster
    user: str
    home: Path
    ssh_port: int
    infra: str = INFRA

    def squeue(self) -> list[str]:
        return self.cluster.run(["squeue", "-h", "-o", "%i %u %j %T"]).splitlines()


def _as_user(account: pwd.struct_passwd, path: Path, text: str, mode: int = 0o600) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chown(path.parent, account.pw_uid, account.pw_gid)
    path.write_text(text)
    path.chmod(mode)
    os.chown(path, account.pw_uid, account.pw_gid)


def _login_setup(account: pwd.struct_passwd, port: int) -> None:
    """The user's login key, ~/.slurm/config and ~/.sky/config.yaml (SkyPilot's state in the
    user's home is otherwise SkyPilot's own)."""
    home = Path(account.pw_dir)
    key = home / LOGIN_KEY
    if not key.exists():
        key.parent.mkdir(mode=0o700, exist_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
                       check=True, capture_output=True)
        for f in (key, key.with_suffix(".pub"), key.parent):
            os.chown(f, account.pw_uid, account.pw_gid)
    auth = home / ".ssh" / "authorized_keys"
    pub = key.with_suffix(".pub").read_text().strip()
    have = auth.read_text() if auth.exists() else ""
    if pub not in have:
        _as_user(account, auth, have + ("" if not have or have.endswith("\n") else "\n")
                 + pub + "\n")
    _as_user(account, home / ".slurm" / "config", "\n".join([
        f"Host {SIM_NAME}",
        "    HostName 127.0.0.1",
        f"    Port {port}",
        f"    User {account.pw_name}",
        f"    IdentityFile {key}",
        "    StrictHostKeyChecking no",
        "    UserKnownHostsFile /dev/null",
        "",
    ]))
    _as_user(account, home / ".sky" / "config.yaml", "\n".join([
        "allowed_clouds: [slurm]",
        "slurm:",
        "  provision_timeout: 120",
        "",
    ]))


def _start_sshd(root: Path, account: pwd.struct_passwd, conf: Path) -> tuple[int, int]:
    sshd = "/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else shutil.which("sshd")
    if sshd is None:
        raise BedMissing("`sshd` (openssh-server; scripts/install-slurm.sh)")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                    str(root / "host_key")], check=True, capture_output=True)
    port = free_ports(1)[0]
    (root / "sshd_config").write_text("\n".join([
        "ListenAddress 127.0.0.1",
        f"HostKey {root / 'host_key'}",
        f"PidFile {root / 'sshd.pid'}",
        f"AllowUsers {account.pw_name}",
        "AuthorizedKeysFile .ssh/authorized_keys",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "MaxStartups 200",
        "MaxSessions 200",
        f"SetEnv SLURM_CONF={conf}",
        "",
    ]))
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    pid = _spawn([sshd, "-D", "-e", "-f", str(root / "sshd_config"), "-p", str(port)],
                 root / "sshd.log", root / SSHD_PID, {})
    (root / "port").write_text(f"{port}\n")
    return port, pid


#: the pid of the process holding :data:`LOCK_FILE` (written by whoever takes it)
HOLDER_FILE = LOCK_FILE.with_name(LOCK_FILE.name + ".holder")


def record_holder(pid: int) -> None:
    """Say which process holds the test bed lock (read when another one finds it busy)."""
    HOLDER_FILE.write_text(f"{pid}\n")


def _ancestors() -> set[int]:
    """This process and every process above it (from /proc)."""
    found, pid = set(), os.getpid()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state: ppid
    return found


def _held_by_ancestor() -> int | None:
    """The lock holder's pid when it is this process or one above it (waiting would never
    end: it frees the lock only after we return), else None."""
    try:
        holder = int(HOLDER_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return holder if holder in _ancestors() else None


@contextlib.contextmanager
def testbed_lock(wait: float = 3600.0) -> Iterator[None]:
    """One test bed at a time on a machine: SkyPilot's user has one home (``~/.slurm/config``),
    one API server and one port, so a second pytest session waits for the first to end. When
    the holder is this process or its parent (a test session running ``skyshift sim skypilot
    up`` while its own fixture holds the bed) it fails at once instead of waiting forever."""
    with LOCK_FILE.open("a") as f:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if (holder := _held_by_ancestor()) is not None:
                    raise RuntimeError(
                        f"the SkyPilot test bed ({LOCK_FILE}) is held by pid {holder}, which "
                        "this process runs under: it would wait for itself"
                    ) from None
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the SkyPilot test bed stayed busy ({LOCK_FILE})") from None
                time.sleep(2)
        record_holder(os.getpid())
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def sky_slurm_bed() -> Iterator[SkySlurm]:
    """The bed, started; stopped (daemons ended, directory removed) on leaving. Takes the
    machine's test bed lock first. Raises BedMissing when something it needs is not installed."""
    with testbed_lock():
        yield from _bed()


def missing() -> str | None:
    """What the bed needs and this machine lacks (None: nothing)."""
    client = SkyPilotClient()
    if not client.python.exists():
        return f"SkyPilot's venv at {client.venv} ({INSTALL})"
    user = client.user or DEFAULT_USER
    try:
        pwd.getpwnam(user)
    except KeyError:
        return f"the SkyPilot user {user} ({INSTALL})"
    if os.geteuid() != 0:
        return "root (slurmd, sshd and the switch to the SkyPilot user)"
    for binary in ("slurmctld", "slurmd", "sbatch", "munged", "unshare", "rsync", "sshd"):
        if shutil.which(binary) is None and not Path(f"/usr/sbin/{binary}").exists():
            return f"`{binary}` (scripts/install-slurm.sh and {INSTALL})"
    return None


def _bed() -> Iterator[SkySlurm]:
    lack = missing()
    if lack is not None:
        raise BedMissing(lack)
    # world-readable (the SkyPilot user reads slurm.conf, talks to munge): not pytest's tmp
    root = Path(tempfile.mkdtemp(prefix="skyshift-skysim-"))
    try:
        yield start_bed(root)
    finally:
        stop_bed(root)
        shutil.rmtree(root, ignore_errors=True)


def start_bed(root: Path) -> SkySlurm:
    """Start munged, the simulated Slurm cluster and the login sshd under ``root`` (created
    world-readable) and point SkyPilot's user at them. The caller stops them with
    :func:`stop_bed` (also after a failure here)."""
    account = pwd.getpwnam(SkyPilotClient().user or DEFAULT_USER)
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    munge = Munge(root / "munge")
    munge.start()
    ports = free_ports(3)
    cluster = _NamedNodeCluster(
        name=SIM_NAME, root=root / SIM_NAME, nodes=[f"{SIM_NAME}-n1", f"{SIM_NAME}-n2"],
        ctld_port=ports[0], node_ports=ports[1:], node_cpus=NODE_CPUS,
        node_memory=NODE_MEMORY, munge_socket=munge.socket,
    )
    cluster.write_conf()
    cluster.start(fresh=True)
    (root / "login").mkdir(exist_ok=True)
    port, _ = _start_sshd(root / "login", account, cluster.conf)
    _login_setup(account, port)
    return SkySlurm(cluster, account.pw_name, Path(account.pw_dir), port)


def stop_bed(root: Path) -> bool:
    """Stop what :func:`start_bed` started under ``root``; True if its sshd was running."""
    was_up = _stop(root / "login" / SSHD_PID)
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        SimSlurmCluster.load(root / SIM_NAME).stop()
    Munge(root / "munge").stop()
    return was_up


def running_bed(root: Path) -> SkySlurm | None:
    """The bed :func:`start_bed` left running under ``root``, or None."""
    if _running_pid(root / "login" / SSHD_PID) is None:
        return None
    try:
        cluster = SimSlurmCluster.load(root / SIM_NAME)
        port = int((root / "login" / "port").read_text())
    except (OSError, ValueError, TypeError, KeyError):
        return None
    account = pwd.getpwnam(SkyPilotClient().user or DEFAULT_USER)
    return SkySlurm(cluster, account.pw_name, Path(account.pw_dir), port)
