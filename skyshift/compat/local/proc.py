"""Detached replica processes for the local adapter: launch, liveness, kill.

A replica must outlive the worker that launched it (a ``kill -9`` of the skylet must not take jobs
down) and must record its exit code even when nobody waits for it. So a replica is started through
a small POSIX-sh supervisor: the launcher we spawn (in a new session, so its pid is the process
group of everything the replica runs) forks the supervisor and exits as soon as the supervisor has
written its pid file, so we reap the launcher at once and the supervisor is re-parented to init.
The supervisor runs the command, forwards SIGTERM/SIGHUP to it, and atomically writes
``exit_code`` when the command ends. It works in its replica directory through relative paths, so
a directory renamed away on delete takes the supervisor's writes with it and never touches a new
replica of the same name.

Killing only the supervisor (``kill -9 <pid>``, not the group ``kill -9 -<pgid>``) leaves the
command unsupervised: the replica then reports Failed/Lost and its processes are not tracked any
more.

Liveness is pid + start time (``/proc/<pid>/stat`` field 22), so a recycled pid is never
mistaken for our supervisor, and zombies count as dead. Without ``/proc`` (not Linux) only the pid
is checked.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

PID_FILE = "pid"  # "<pid> <start ticks> <epoch started>"; the pid is also the process group
EXIT_FILE = "exit_code"  # the command's exit status (128+N when killed by signal N)
LOG_FILE = "log"  # stdout and stderr of the current attempt
WORK_DIR = "work"  # the command's working directory
LAUNCH_LOCK = "launch.lock"  # flock held by whoever is starting the replica's process
_HAVE_PROC = Path("/proc/self/stat").exists()

# The supervisor, in POSIX sh (a Python interpreter per replica cost ~30 ms of CPU to start and
# ~9 MB of memory for as long as the replica ran; dash costs about 1 ms and well under 1 MB). A job
# started with `&` by a non-interactive shell ignores SIGINT and SIGQUIT, so where coreutils `env`
# has --default-signal the command is started through it and gets default dispositions.
_SUPERVISOR = Path(__file__).with_name("supervisor.sh")


@dataclass
class ProcInfo:
    """What the wrapper recorded about itself."""

    pid: int  # the supervisor
    start_ticks: str
    started_at: float
    pgid: int = 0  # the process group of the supervisor and the command (0: same as pid)

    @property
    def group(self) -> int:
        return self.pgid or self.pid


def read_pid(rdir: Path) -> ProcInfo | None:
    try:
        parts = (rdir / PID_FILE).read_text().split()
        pgid = int(parts[3]) if len(parts) > 3 else 0  # older wrappers: the pid is the group
        return ProcInfo(int(parts[0]), parts[1], float(parts[2]), pgid)
    except (OSError, ValueError, IndexError):
        return None


def read_exit(rdir: Path) -> tuple[int, float] | None:
    """(exit code, finish time) once the command has ended."""
    path = rdir / EXIT_FILE
    try:
        return int(path.read_text().strip()), path.stat().st_mtime
    except (OSError, ValueError):
        return None


def read_log(rdir: Path, tail: int | None = None) -> str:
    """The current attempt's output, or its last ``tail`` lines (read from the end)."""
    path = rdir / LOG_FILE
    try:
        f = path.open("rb")
    except FileNotFoundError:
        return ""
    with f:
        if tail is None:
            data = f.read()
        elif tail <= 0:
            data = b""
        else:
            end, size = f.seek(0, os.SEEK_END), 8192
            while True:
                start = max(0, end - size)
                f.seek(start)
                data = f.read(end - start)
                if start == 0 or data.count(b"\n") > tail:
                    break
                size *= 2
            data = b"".join(data.splitlines(keepends=True)[-tail:])
    return data.decode("utf-8", errors="replace")


def alive(info: ProcInfo) -> bool:
    """True while the wrapper recorded in ``info`` runs (not a zombie, not a recycled pid)."""
    if not _HAVE_PROC or info.start_ticks == "0":
        return pid_exists(info.pid)
    try:  # once per running replica per sync round: the cheapest read there is
        fd = os.open(f"/proc/{info.pid}/stat", os.O_RDONLY)
    except OSError:
        return False
    try:
        data = os.read(fd, 4096)
    except OSError:
        return False
    finally:
        os.close(fd)
    fields = data.rsplit(b")", 1)[-1].split()
    return (
        len(fields) > 19
        and fields[0] not in (b"Z", b"X")
        and fields[19].decode() == info.start_ticks
    )


def pid_exists(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user's counts; a zombie counts too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(info: ProcInfo, sig: int, members: set[int] | None = None) -> None:
    """Signal the replica's whole process group, only if it is still ours: its supervisor
    runs, or the group still has live members (``members``: groups seen by
    :func:`live_groups`; a group id is not reused while a process is in the group)."""
    if alive(info) or (members is not None and info.group in members):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(info.group, sig)


def live_groups() -> set[int] | None:
    """Process groups with a live (not zombie) member, from one pass over /proc; None where
    there is no /proc. A replica's command may outlive its supervisor for a moment (both
    killed at once, the command not yet scheduled) or for good (a child that ignores SIGTERM
    while the supervisor exits): stopping waits for the group, not only the supervisor."""
    if not _HAVE_PROC:
        return None
    groups: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[-1].split()
        except OSError:
            continue
        if len(fields) > 2 and fields[0] not in (b"Z", b"X"):
            groups.add(int(fields[2]))
    return groups


def launch(rdir: Path, argv: list[str], env: dict[str, str], timeout: float = 30.0) -> None:
    """Start ``argv`` detached in ``rdir`` with exactly ``env``; returns once the supervisor has
    written its pid file. The command runs in ``work`` (where that links to, when a link).

    The supervisor runs as we do; ``argv`` may switch user itself (``setpriv ...``).
    Raises OSError when the launcher fails (errno E2BIG: ``argv`` and ``env`` are too big).
    """
    cwd = rdir / WORK_DIR
    cwd.mkdir(exist_ok=True)
    if cwd.is_symlink():  # the real path: the user it runs as may not pass through ``rdir``
        cwd = cwd.resolve()
    proc = subprocess.Popen(
        ["/bin/sh", str(_SUPERVISOR), str(rdir), str(cwd), f"{time.time():.6f}",
         _env_tool(), *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
        close_fds=True,
    )
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.wait()
        raise OSError(f"replica launcher did not report within {timeout:g}s") from exc
    if proc.returncode != 0:
        detail = err.decode(errors="replace").strip() or _log_tail(rdir)
        raise OSError(f"replica launcher failed ({proc.returncode}): {detail}")


def _log_tail(rdir: Path) -> str:
    return read_log(rdir, tail=3).strip() or "no detail"


@functools.cache
def _env_tool() -> str:
    """Path of an ``env`` that supports --default-signal (coreutils >= 8.31), else ""."""
    path = shutil.which("env", path=os.defpath) or ""
    if not path:
        return ""
    try:
        ok = subprocess.run([path, "--default-signal", "true"], capture_output=True,
                            timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return path if ok else ""


def hold_launch(rdir: Path, wait: bool = False) -> int | None:
    """Take the replica's launch lock (a file descriptor to close to release it), or None when
    another thread or process holds it and ``wait`` is false. A process that dies releases it.

    Raises FileNotFoundError when the replica directory is gone.
    """
    fd = os.open(rdir / LAUNCH_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def wait_launch(rdir: Path) -> None:
    """Block until nobody is starting the replica's process (returns at once when it is gone)."""
    with contextlib.suppress(FileNotFoundError):
        fd = hold_launch(rdir, wait=True)
        if fd is not None:
            os.close(fd)


def _still_running(infos: list[ProcInfo]) -> tuple[list[ProcInfo], set[int] | None]:
    """The replicas whose supervisor or any process of whose group is alive."""
    running = [i for i in infos if alive(i)]
    if len(running) == len(infos):
        return running, None  # no need to read /proc for the groups
    members = live_groups()
    if members is None:
        return running, None
    return [i for i in infos if i in running or i.group in members], members


def _wait_gone(running: list[ProcInfo], seconds: float, poll: float) -> list[ProcInfo]:
    deadline = time.monotonic() + seconds
    while running and time.monotonic() < deadline:
        time.sleep(poll)
        running, _ = _still_running(running)
    return running


def stop(infos: list[ProcInfo], grace: float, poll: float = 0.05) -> None:
    """SIGTERM every group, wait up to ``grace`` seconds, then SIGKILL whatever is left, and
    return once no process of those groups is alive (bounded: 5 s after the SIGKILL).

    Blocking: call it from a thread (``asyncio.to_thread``) in async code.
    """
    running, members = _still_running(infos)
    for info in running:
        signal_group(info, signal.SIGTERM, members)
    running = _wait_gone(running, grace, poll)
    running, members = _still_running(running)
    for info in running:
        signal_group(info, signal.SIGKILL, members)
    _wait_gone(running, 5.0, poll)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the kernel's pick)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
