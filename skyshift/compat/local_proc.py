"""Detached replica processes for the local adapter: launch, liveness, kill.

A replica must outlive the worker that launched it (a ``kill -9`` of the skylet must not take jobs
down) and must record its exit code even when nobody waits for it. So a replica is started through
a tiny Python wrapper that double-forks: the launcher we spawn forks the wrapper and exits as soon
as the wrapper has written its pid file, so we reap the launcher at once and the wrapper is
re-parented to init. The wrapper calls ``setsid`` (its pid is the process group to kill), runs the
command, and atomically writes ``exit_code`` when the command ends. It works in its replica
directory through relative paths, so a directory renamed away on delete takes the wrapper's writes
with it and never touches a new replica of the same name.

Killing only the wrapper (``kill -9 <pid>``, not the group ``kill -9 -<pid>``) leaves the command
unsupervised: the replica then reports Failed/Lost and its processes are not tracked any more.

Liveness is pid + start time (``/proc/<pid>/stat`` field 22), so a recycled pid is never mistaken
for our wrapper, and zombies count as dead. Without ``/proc`` (not Linux) only the pid is checked.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PID_FILE = "pid"  # "<pid> <start ticks> <epoch started>"; the pid is also the process group
EXIT_FILE = "exit_code"  # the command's exit status (128+N when killed by signal N)
LOG_FILE = "log"  # stdout and stderr of the current attempt
WORK_DIR = "work"  # the command's working directory
_HAVE_PROC = Path("/proc/self/stat").exists()

# Runs as `python -I -S -c _WRAPPER <replica dir>` with a JSON {"argv", "env", "cwd"} on stdin.
# Only the standard library, so it never depends on how skyshift is installed.
_WRAPPER = r"""
import json, os, signal, subprocess, sys, time
spec = json.loads(sys.stdin.read())
os.chdir(sys.argv[1])
r, w = os.pipe()
if os.fork():
    os.close(w)
    while os.read(r, 1):
        pass
    os._exit(0 if os.path.exists("pid") else 1)
os.close(r)
os.setsid()
devnull = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(devnull, fd)
def put(name, text):
    with open(name + ".tmp", "w") as f:
        f.write(text)
    os.replace(name + ".tmp", name)
try:
    with open("/proc/self/stat") as f:
        ticks = f.read().rsplit(")", 1)[1].split()[19]
except OSError:
    ticks = "0"
put("pid", "%d %s %.6f\n" % (os.getpid(), ticks, time.time()))
log = open("log", "ab")
try:
    child = subprocess.Popen(spec["argv"], cwd=spec["cwd"], env=spec["env"],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log)
except Exception as exc:
    log.write(("skyshift: cannot start replica: %s\n" % exc).encode())
    log.flush()
    put("exit_code", "127\n")
    os._exit(0)
def forward(signum, frame):
    child.send_signal(signum)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, forward)
os.close(w)
code = child.wait()
put("exit_code", "%d\n" % (128 - code if code < 0 else code))
"""


@dataclass
class ProcInfo:
    """What the wrapper recorded about itself."""

    pid: int
    start_ticks: str
    started_at: float


def read_pid(rdir: Path) -> ProcInfo | None:
    try:
        parts = (rdir / PID_FILE).read_text().split()
        return ProcInfo(int(parts[0]), parts[1], float(parts[2]))
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
        return _pid_exists(info.pid)
    try:
        with open(f"/proc/{info.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] not in ("Z", "X") and fields[19] == info.start_ticks


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(info: ProcInfo, sig: int) -> None:
    """Signal the replica's whole process group, only if it is still ours."""
    if alive(info):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(info.pid, sig)


def launch(rdir: Path, argv: list[str], env: dict[str, str], timeout: float = 30.0) -> None:
    """Start ``argv`` detached in ``rdir``; returns once the wrapper has written its pid file.

    Raises OSError when the launcher fails.
    """
    (rdir / WORK_DIR).mkdir(exist_ok=True)
    payload = json.dumps({"argv": argv, "env": env, "cwd": str(rdir / WORK_DIR)})
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", _WRAPPER, str(rdir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
    )
    try:
        _, err = proc.communicate(payload.encode(), timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.wait()
        raise OSError(f"replica launcher did not report within {timeout:g}s") from exc
    if proc.returncode != 0:
        detail = err.decode(errors="replace").strip()
        raise OSError(f"replica launcher failed ({proc.returncode}): {detail}")


def _wait_gone(running: list[ProcInfo], seconds: float, poll: float) -> list[ProcInfo]:
    deadline = time.monotonic() + seconds
    while running and time.monotonic() < deadline:
        time.sleep(poll)
        running = [i for i in running if alive(i)]
    return running


def stop(infos: list[ProcInfo], grace: float, poll: float = 0.05) -> None:
    """SIGTERM every group, wait up to ``grace`` seconds, then SIGKILL whatever is left.

    Blocking: call it from a thread (``asyncio.to_thread``) in async code.
    """
    running = [i for i in infos if alive(i)]
    for info in running:
        signal_group(info, signal.SIGTERM)
    running = _wait_gone(running, grace, poll)
    for info in running:
        signal_group(info, signal.SIGKILL)
    _wait_gone(running, 5.0, poll)
